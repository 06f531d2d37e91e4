// Package protobuf is the PROTOBUF schema language of the schema registry:
// a schema is the text of one .proto file, its references are the files it
// imports, keyed by import path, as Confluent's Protobuf references are.
//
// Parsing compiles the text with github.com/bufbuild/protocompile into
// descriptors, so a schema is judged as protoc judges it. That is stricter
// than Confluent's registry, whose parser (Square's Wire) lets an unused
// import go unresolved and custom options go unchecked: here every import
// must resolve and every option must be known. The well-known types (google/protobuf/timestamp.proto and the rest) and
// Confluent's confluent/meta.proto and confluent/type/decimal.proto import
// without being registered. Compatibility follows Confluent's Protobuf rules
// (compat.go), values are encoded as Confluent's Protobuf serializers write
// them (codec.go), and the canonical forms are described in canonical.go.
package protobuf

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/reflect/protoreflect"

	"millrace/schemas/format"
)

// Type is the PROTOBUF schema language. It holds no state and is safe for
// concurrent use.
var Type format.Type = protobufType{}

type protobufType struct{}

// Name is format.Protobuf.
func (protobufType) Name() string { return format.Protobuf }

// Parse compiles text as a .proto file whose imports are resolved from refs
// (import path to file text), from the built-in Confluent files and, for
// google/protobuf/*.proto, from the well-known types of the protobuf
// runtime. The schema and each reference may also be a base64 serialized
// FileDescriptorProto (serialized.go). Limits are checked on the raw texts
// before anything is compiled: a zero field of limits takes
// format.DefaultLimits' value.
func (protobufType) Parse(text string, refs map[string]string, limits format.Limits) (format.Schema, error) {
	limits = limits.WithDefaults()
	if err := checkLimits(text, refs, limits); err != nil {
		return nil, err
	}
	root := rootName(refs)
	sources := make(map[string]string, len(refs)+len(builtinImports)+1)
	for name, builtin := range builtinImports {
		sources[name] = builtin
	}
	kept := make(map[string]string, len(refs))
	for name, ref := range refs {
		sources[name] = ref
		kept[name] = ref
	}
	sources[root] = text
	resolve, serialized, err := resolver(sources, limits)
	if err != nil {
		return nil, err
	}
	compiler := protocompile.Compiler{
		Resolver: resolve,
		// One file at a time: a registration is small, and the registry
		// may parse many concurrently already.
		MaxParallelism: 1,
		SourceInfoMode: protocompile.SourceInfoNone,
	}
	files, err := compiler.Compile(context.Background(), root)
	if err != nil {
		return nil, compileError(err, root)
	}
	file := files[0]
	if serialized {
		if err := validateDescriptors(file); err != nil {
			return nil, err
		}
	}
	s := &schema{text: text, limits: limits, file: file, refs: kept}
	s.canonical = canonicalForm(file, text, false)
	s.normalized = canonicalForm(file, text, true)
	s.messages = topLevelMessages(file)
	s.serialized = serializedDescriptor(text) != nil
	return s, nil
}

// rootName is the file name the schema itself is compiled under: the name
// its errors are reported against, and one that none of its references uses.
func rootName(refs map[string]string) string {
	name := "schema.proto"
	for i := 1; ; i++ {
		if _, taken := refs[name]; !taken {
			return name
		}
		name = fmt.Sprintf("schema_%d.proto", i)
	}
}

// compileError turns protocompile's error (already "file:line:col: what")
// into a sentence that says the schema was refused.
func compileError(err error, root string) error {
	var panicked protocompile.PanicError
	if errors.As(err, &panicked) {
		return fmt.Errorf("the Protobuf schema could not be compiled (the compiler failed on %s); report it with the schema", panicked.File)
	}
	msg := err.Error()
	if strings.Contains(msg, "could not resolve path") {
		return fmt.Errorf("the Protobuf schema does not compile: %s; every import but google/protobuf/*.proto, confluent/meta.proto and confluent/type/decimal.proto must be one of the schema's references, named by its import path", msg)
	}
	if !strings.Contains(msg, root) {
		return fmt.Errorf("the Protobuf schema does not compile: %s (in one of its references)", msg)
	}
	return fmt.Errorf("the Protobuf schema does not compile: %s", msg)
}

// schema is one compiled .proto file. Everything is computed at Parse and
// never written again, so it is safe for concurrent use.
type schema struct {
	text   string
	limits format.Limits
	file   linker.File
	// refs are the referenced texts by import path, to tell whether a type
	// imported by two schemas comes from the same file.
	refs       map[string]string
	canonical  string
	normalized string
	// messages are the file's messages as message indexes count them.
	messages []protoreflect.MessageDescriptor
	// serialized is set when the schema was registered as a serialized
	// descriptor, whose map entries message indexes count (codec.go).
	serialized bool
}

// Type is protobuf.Type.
func (s *schema) Type() format.Type { return Type }

// Text is the .proto text as registered.
func (s *schema) Text() string { return s.text }

// Canonical is described in canonical.go.
func (s *schema) Canonical(normalize bool) string {
	if normalize {
		return s.normalized
	}
	return s.canonical
}
