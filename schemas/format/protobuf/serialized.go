package protobuf

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"millrace/schemas/format"
)

// Confluent's registry takes a Protobuf schema, or a reference's text, in
// either of two forms: .proto text, or a FileDescriptorProto serialized and
// base64-encoded, which is how Confluent's Python serializer registers the
// descriptors of generated code. The two cannot be mistaken for one
// another: .proto text that declares anything has spaces or semicolons,
// base64 never does.

// serializedDescriptor returns the descriptor text encodes, or nil when
// text is not a serialized FileDescriptorProto that declares something.
func serializedDescriptor(text string) *descriptorpb.FileDescriptorProto {
	text = strings.TrimSpace(text)
	if text == "" || strings.TrimLeft(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != "" {
		return nil
	}
	encoded, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil
	}
	fd := new(descriptorpb.FileDescriptorProto)
	if proto.Unmarshal(encoded, fd) != nil {
		return nil
	}
	if len(fd.MessageType) == 0 && len(fd.EnumType) == 0 && len(fd.Service) == 0 && fd.Syntax == nil && fd.Package == nil {
		return nil
	}
	return fd
}

// descriptorDepth is how deeply a descriptor nests messages: the depth
// limit a serialized schema is held to, as brackets are for text.
func descriptorDepth(messages []*descriptorpb.DescriptorProto) int {
	deepest := 0
	for _, m := range messages {
		deepest = max(deepest, 1+descriptorDepth(m.NestedType))
	}
	return deepest
}

// resolver finds each file of a compilation among sources (the schema, its
// references and the built-in imports), as text or as a serialized
// descriptor, and then among the well-known types.
// It says whether any file was a serialized descriptor.
func resolver(sources map[string]string, limits format.Limits) (protocompile.Resolver, bool, error) {
	descriptors := map[string]*descriptorpb.FileDescriptorProto{}
	for name, source := range sources {
		fd := serializedDescriptor(source)
		if fd == nil {
			continue
		}
		if depth := descriptorDepth(fd.MessageType); depth > limits.MaxDepth {
			return nil, false, fmt.Errorf("the serialized descriptor of %q nests messages %d deep, more than the registry's limit of %d: %w", name, depth, limits.MaxDepth, format.ErrLimit)
		}
		fd.Name = proto.String(name)
		fd.SourceCodeInfo = nil
		descriptors[name] = fd
	}
	find := protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		if fd, ok := descriptors[path]; ok {
			return protocompile.SearchResult{Proto: fd}, nil
		}
		if source, ok := sources[path]; ok {
			return protocompile.SearchResult{Source: strings.NewReader(source)}, nil
		}
		return protocompile.SearchResult{}, fs.ErrNotExist
	})
	return protocompile.WithStandardImports(find), len(descriptors) > 0, nil
}

// validateDescriptors checks a compiled file and its imports with
// protobuf-go's own rules. The compiler trusts a descriptor it is given
// more than text it parses (a map field whose entry has no key, say), and
// the decoder and the compatibility check rely on what protobuf-go
// guarantees of a file it accepts.
func validateDescriptors(file protoreflect.FileDescriptor) error {
	set := &descriptorpb.FileDescriptorSet{}
	added := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if added[f.Path()] {
			return
		}
		added[f.Path()] = true
		for i := 0; i < f.Imports().Len(); i++ {
			add(f.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	add(file)
	if _, err := protodesc.NewFiles(set); err != nil {
		return fmt.Errorf("the Protobuf schema's serialized descriptor is not valid: %v", err)
	}
	return nil
}
