package protobuf

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/bufbuild/protocompile/linker"
	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// canonicalForm is a schema's identity: the compiled FileDescriptorProto,
// without its file name and source positions, serialized deterministically
// and base64-encoded (the shape of Confluent's `format=serialized`).
//
// Compiling already removes what only the text's spelling carries:
// whitespace, comments, the order options are written in (options become
// fields of an options message, serialized by field number) and relative
// type names (every type reference is fully qualified). So without
// normalize two texts are one schema when they differ only in formatting.
//
// normalize also ignores declaration order where it carries no meaning:
// imports, fields within a message (the wire knows numbers, not positions),
// enums, extensions, services and methods by name or number, reserved
// ranges and names. Messages keep their order, because Confluent's message
// indexes (codec.go) address messages by position; enum values keep theirs,
// because a proto2 enum's first value is its default.
func canonicalForm(file linker.File, text string, normalize bool) string {
	fd, ok := proto.Clone(protoutil.ProtoFromFileDescriptor(file)).(*descriptorpb.FileDescriptorProto)
	if !ok {
		return ""
	}
	fd.Name = nil
	fd.SourceCodeInfo = nil
	// protoc writes every field's JSON name into the descriptors it
	// serializes, a compiler of text need not: the default one is no part
	// of the schema's identity.
	clearDefaultJSONNames(fd.MessageType)
	for _, f := range fd.Extension {
		clearDefaultJSONName(f)
	}
	if normalize {
		normalizeFile(fd)
	}
	encoded, err := proto.MarshalOptions{Deterministic: true}.Marshal(fd)
	if err != nil {
		// A compiled descriptor always marshals; should it not, the
		// schema is still identified, by its text.
		return "text:" + text
	}
	return base64.StdEncoding.EncodeToString(encoded)
}

// normalizeFile sorts, in place, what normalize ignores the order of.
func normalizeFile(fd *descriptorpb.FileDescriptorProto) {
	sortDependencies(fd)
	for _, m := range fd.MessageType {
		normalizeMessage(m)
	}
	sortEnums(fd.EnumType)
	sortFields(fd.Extension)
	slices.SortStableFunc(fd.Service, func(a, b *descriptorpb.ServiceDescriptorProto) int {
		return cmp.Compare(a.GetName(), b.GetName())
	})
	for _, s := range fd.Service {
		slices.SortStableFunc(s.Method, func(a, b *descriptorpb.MethodDescriptorProto) int {
			return cmp.Compare(a.GetName(), b.GetName())
		})
	}
}

// sortDependencies sorts the imports and renumbers the public and weak
// import lists, which hold positions in the import list.
func sortDependencies(fd *descriptorpb.FileDescriptorProto) {
	sorted := slices.Clone(fd.Dependency)
	slices.Sort(sorted)
	position := make(map[string]int32, len(sorted))
	for i, dep := range sorted {
		position[dep] = int32(i)
	}
	renumber := func(indexes []int32) {
		for i, old := range indexes {
			indexes[i] = position[fd.Dependency[old]]
		}
		slices.Sort(indexes)
	}
	renumber(fd.PublicDependency)
	renumber(fd.WeakDependency)
	fd.Dependency = sorted
}

func normalizeMessage(m *descriptorpb.DescriptorProto) {
	sortFields(m.Field)
	sortFields(m.Extension)
	for _, nested := range m.NestedType {
		normalizeMessage(nested)
	}
	sortEnums(m.EnumType)
	slices.SortStableFunc(m.ExtensionRange, func(a, b *descriptorpb.DescriptorProto_ExtensionRange) int {
		return cmp.Compare(a.GetStart(), b.GetStart())
	})
	slices.SortStableFunc(m.ReservedRange, func(a, b *descriptorpb.DescriptorProto_ReservedRange) int {
		return cmp.Compare(a.GetStart(), b.GetStart())
	})
	slices.Sort(m.ReservedName)
}

// sortFields orders fields (or extensions) by what they extend, then number.
func sortFields(fields []*descriptorpb.FieldDescriptorProto) {
	slices.SortStableFunc(fields, func(a, b *descriptorpb.FieldDescriptorProto) int {
		return cmp.Or(cmp.Compare(a.GetExtendee(), b.GetExtendee()), cmp.Compare(a.GetNumber(), b.GetNumber()))
	})
}

func sortEnums(enums []*descriptorpb.EnumDescriptorProto) {
	slices.SortStableFunc(enums, func(a, b *descriptorpb.EnumDescriptorProto) int {
		return cmp.Compare(a.GetName(), b.GetName())
	})
	for _, e := range enums {
		slices.SortStableFunc(e.ReservedRange, func(a, b *descriptorpb.EnumDescriptorProto_EnumReservedRange) int {
			return cmp.Compare(a.GetStart(), b.GetStart())
		})
		slices.Sort(e.ReservedName)
	}
}

func clearDefaultJSONNames(messages []*descriptorpb.DescriptorProto) {
	for _, m := range messages {
		for _, f := range m.Field {
			clearDefaultJSONName(f)
		}
		for _, f := range m.Extension {
			clearDefaultJSONName(f)
		}
		clearDefaultJSONNames(m.NestedType)
	}
}

func clearDefaultJSONName(f *descriptorpb.FieldDescriptorProto) {
	if f.JsonName != nil && f.GetJsonName() == defaultJSONName(f.GetName()) {
		f.JsonName = nil
	}
}

// defaultJSONName is protoc's JSON name of a field: underscores dropped,
// the letter after each one upper-cased.
func defaultJSONName(name string) string {
	var b strings.Builder
	upper := false
	for _, c := range name {
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			b.WriteRune(c - 'a' + 'A')
			upper = false
		default:
			b.WriteRune(c)
			upper = false
		}
	}
	return b.String()
}
