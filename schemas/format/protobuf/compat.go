package protobuf

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"millrace/schemas/format"
)

// Compatibility follows Confluent's Protobuf schema diff
// (io.confluent.kafka.schemaregistry.protobuf.diff): the writer's schema is
// its "original", the reader's its "update"; messages are matched by name
// within their scope, fields by number, oneofs by name. Confluent records
// every difference and calls a change compatible when all of them are in
// its compatible set: MESSAGE_ADDED, MESSAGE_MOVED, ENUM_ADDED,
// ENUM_REMOVED, ENUM_CONST_ADDED/CHANGED/REMOVED, FIELD_ADDED,
// FIELD_REMOVED, FIELD_NAME_CHANGED, FIELD_STRING_OR_BYTES_LABEL_CHANGED,
// ONEOF_ADDED, ONEOF_REMOVED and ONEOF_FIELD_ADDED. Only the other kinds are
// reported here, so those compatible differences are not computed at all
// (enums are never compared, since every enum change is compatible). The
// set is current Confluent's: PACKAGE_CHANGED was in it once and is not
// now. A scalar field whose type leaves its wire-compatible group is
// FIELD_SCALAR_KIND_CHANGED; FIELD_KIND_CHANGED is kept, as in Confluent,
// for a field that changes between scalar (enums included), message and
// map.
//
// Confluent's diff has no SYNTAX_VERSION_CHANGED: a proto2 file becoming
// proto3 is judged by its fields like any other change (a required field
// lost is REQUIRED_FIELD_REMOVED), and so it is here.
const (
	kindPackageChanged            = "PACKAGE_CHANGED"
	kindMessageRemoved            = "MESSAGE_REMOVED"
	kindFieldKindChanged          = "FIELD_KIND_CHANGED"
	kindFieldScalarKindChanged    = "FIELD_SCALAR_KIND_CHANGED"
	kindFieldNamedTypeChanged     = "FIELD_NAMED_TYPE_CHANGED"
	kindFieldNumericLabel         = "FIELD_NUMERIC_LABEL_CHANGED"
	kindRequiredFieldAdded        = "REQUIRED_FIELD_ADDED"
	kindRequiredFieldRemoved      = "REQUIRED_FIELD_REMOVED"
	kindOneofFieldRemoved         = "ONEOF_FIELD_REMOVED"
	kindMultipleFieldsToOneof     = "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
	kindFieldMovedToExistingOneof = "FIELD_MOVED_TO_EXISTING_ONEOF"
)

// ReadsFrom reports what keeps a reader of s from reading values written
// with writer, by Confluent's Protobuf rules. Paths are Confluent's: "#/"
// then message names, oneof names and field numbers, e.g. "#/Order/3".
func (s *schema) ReadsFrom(writer format.Schema) []format.Incompat {
	w, ok := writer.(*schema)
	if !ok {
		return []format.Incompat{{
			Kind:    "TYPE_MISMATCH",
			Path:    "#/",
			Message: fmt.Sprintf("The writer's schema is %s, not PROTOBUF, so a Protobuf reader cannot read its values.", writer.Type().Name()),
		}}
	}
	c := &comparer{
		writer: w, reader: s, path: []string{"#"},
		comparing: map[protoreflect.FullName]bool{},
		named:     map[[2]protoreflect.FullName]bool{},
	}
	if w.file.Package() != s.file.Package() {
		c.add(kindPackageChanged, fmt.Sprintf("The package changed from %q to %q.", w.file.Package(), s.file.Package()))
	}
	c.compareMessages(w.messages, s.messages)
	return c.found
}

type comparer struct {
	writer, reader *schema
	path           []string
	found          []format.Incompat
	// comparing holds the writer's messages being compared, so recursive
	// message types are compared once.
	comparing map[protoreflect.FullName]bool
	// named remembers, per pair of imported message types (writer's,
	// reader's), whether they were found incompatible: each pair is
	// compared once however many fields use it, so types that use each
	// other many times over cost their size, not their number of paths.
	named map[[2]protoreflect.FullName]bool
}

func (c *comparer) enter(name string) { c.path = append(c.path, name) }
func (c *comparer) leave()            { c.path = c.path[:len(c.path)-1] }

func (c *comparer) add(kind, message string) {
	p := strings.Join(c.path, "/")
	if len(c.path) == 1 {
		p += "/"
	}
	c.found = append(c.found, format.Incompat{Kind: kind, Path: p, Message: message})
}

// compareMessages matches two scopes' messages (a file's, or one message's
// nested ones) by name. A message moved to another position is compatible
// (MESSAGE_MOVED): message indexes are read against the writer's schema.
func (c *comparer) compareMessages(writer, reader []protoreflect.MessageDescriptor) {
	byName := make(map[protoreflect.Name]protoreflect.MessageDescriptor, len(reader))
	for _, m := range reader {
		byName[m.Name()] = m
	}
	for _, wm := range writer {
		c.enter(string(wm.Name()))
		if rm, ok := byName[wm.Name()]; ok {
			c.compareMessage(wm, rm)
		} else {
			c.add(kindMessageRemoved, fmt.Sprintf("The reader's schema has no message %s, which the writer's has.", wm.FullName()))
		}
		c.leave()
	}
}

func (c *comparer) compareMessage(w, r protoreflect.MessageDescriptor) {
	if !c.comparing[w.FullName()] {
		c.comparing[w.FullName()] = true
		c.compareFields(w, r)
		delete(c.comparing, w.FullName())
	}
	c.compareMessages(nestedMessages(w), nestedMessages(r))
}

// compareFields compares one message's fields: those in oneofs by oneof,
// the others by number.
func (c *comparer) compareFields(w, r protoreflect.MessageDescriptor) {
	writerRegular := map[protoreflect.FieldNumber]protoreflect.FieldDescriptor{}
	writerInOneof := map[protoreflect.FieldNumber]bool{}
	for i := 0; i < w.Fields().Len(); i++ {
		f := w.Fields().Get(i)
		if realOneof(f) != nil {
			writerInOneof[f.Number()] = true
		} else {
			writerRegular[f.Number()] = f
		}
	}

	// Fields that join a oneof: one alone is fine (a oneof of one field
	// reads like the field), several are not, since a writer may have set
	// more than one of them; joining a oneof that had fields already is
	// not either.
	for i := 0; i < r.Oneofs().Len(); i++ {
		o := r.Oneofs().Get(i)
		if o.IsSynthetic() {
			continue
		}
		moved, existing := 0, 0
		for j := 0; j < o.Fields().Len(); j++ {
			n := o.Fields().Get(j).Number()
			if _, ok := writerRegular[n]; ok {
				delete(writerRegular, n)
				moved++
			} else if writerInOneof[n] {
				existing++
			}
		}
		c.enter(string(o.Name()))
		switch {
		case moved > 1:
			c.add(kindMultipleFieldsToOneof, fmt.Sprintf("%d fields the writer's schema has outside a oneof are in the reader's oneof %s.", moved, o.Name()))
		case moved == 1 && existing > 0:
			c.add(kindFieldMovedToExistingOneof, fmt.Sprintf("A field the writer's schema has outside a oneof is in the reader's existing oneof %s.", o.Name()))
		}
		c.leave()
	}

	for i := 0; i < w.Oneofs().Len(); i++ {
		wo := w.Oneofs().Get(i)
		ro := r.Oneofs().ByName(wo.Name())
		if wo.IsSynthetic() || ro == nil || ro.IsSynthetic() {
			continue
		}
		c.enter(string(wo.Name()))
		for j := 0; j < wo.Fields().Len(); j++ {
			wf := wo.Fields().Get(j)
			c.enter(strconv.Itoa(int(wf.Number())))
			if rf := fieldInOneof(ro, wf.Number()); rf != nil {
				c.compareField(wf, rf)
			} else {
				c.add(kindOneofFieldRemoved, fmt.Sprintf("The reader's oneof %s has no field %d, which the writer's has.", wo.Name(), wf.Number()))
			}
			c.leave()
		}
		c.leave()
	}

	readerRegular := map[protoreflect.FieldNumber]protoreflect.FieldDescriptor{}
	for i := 0; i < r.Fields().Len(); i++ {
		if f := r.Fields().Get(i); realOneof(f) == nil {
			readerRegular[f.Number()] = f
		}
	}
	for _, n := range unionNumbers(writerRegular, readerRegular) {
		wf, rf := writerRegular[n], readerRegular[n]
		c.enter(strconv.Itoa(int(n)))
		switch {
		case rf == nil && wf.Cardinality() == protoreflect.Required:
			c.add(kindRequiredFieldRemoved, fmt.Sprintf("The reader's schema has no field %d, which the writer's has as required.", n))
		case wf == nil && rf.Cardinality() == protoreflect.Required:
			c.add(kindRequiredFieldAdded, fmt.Sprintf("The reader's schema requires field %d, which the writer's schema does not have.", n))
		case wf != nil && rf != nil:
			c.compareField(wf, rf)
		}
		c.leave()
	}
}

// compareField compares two fields of the same number. A new name is
// compatible (FIELD_NAME_CHANGED): the wire carries numbers.
func (c *comparer) compareField(w, r protoreflect.FieldDescriptor) {
	c.compareTypes(explicitLabel(w), explicitLabel(r), w, r)
}

// fieldKind is Confluent's grouping of field types: enums are scalars.
type fieldKind int

const (
	kindScalar fieldKind = iota
	kindMap
	kindMessage
)

func kindOf(f protoreflect.FieldDescriptor) fieldKind {
	switch {
	case f.IsMap():
		return kindMap
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return kindMessage
	default:
		return kindScalar
	}
}

func (c *comparer) compareTypes(writerLabel, readerLabel protoreflect.Cardinality, w, r protoreflect.FieldDescriptor) {
	wk, rk := kindOf(w), kindOf(r)
	if wk != rk {
		c.add(kindFieldKindChanged, fmt.Sprintf("The field is %s in the writer's schema and %s in the reader's.", describe(w), describe(r)))
		return
	}
	switch wk {
	case kindMap:
		c.compareTypes(0, 0, w.MapKey(), r.MapKey())
		c.compareTypes(0, 0, w.MapValue(), r.MapValue())
	case kindMessage:
		c.compareNamedTypes(w.Message(), r.Message())
	default:
		group := scalarGroup(w)
		if group != scalarGroup(r) {
			c.add(kindFieldScalarKindChanged, fmt.Sprintf("The field is %s in the writer's schema and %s in the reader's, which the wire does not read as one another.", describe(w), describe(r)))
			return
		}
		if writerLabel != 0 && readerLabel != 0 && writerLabel != readerLabel && group != groupStringOrBytes {
			c.add(kindFieldNumericLabel, fmt.Sprintf("The numeric field is %s in the writer's schema and %s in the reader's.", writerLabel, readerLabel))
		}
	}
}

// compareNamedTypes compares the message types of two message fields. Types
// of the schema itself are compared where they are declared; an imported
// type is compared here, unless both sides import it from the same file
// with the same text.
func (c *comparer) compareNamedTypes(w, r protoreflect.MessageDescriptor) {
	wl, rl := localName(w), localName(r)
	if wl != rl {
		c.add(kindFieldNamedTypeChanged, fmt.Sprintf("The field's message type is %s in the writer's schema and %s in the reader's.", w.FullName(), r.FullName()))
		return
	}
	wp, rp := w.ParentFile().Path(), r.ParentFile().Path()
	if wp == c.writer.file.Path() && rp == c.reader.file.Path() {
		return
	}
	if wp == rp && c.writer.refs[wp] == c.reader.refs[rp] {
		return
	}
	pair := [2]protoreflect.FullName{w.FullName(), r.FullName()}
	incompatible, done := c.named[pair]
	if !done {
		// Recorded as compatible while in progress, so a type that
		// contains itself ends the walk.
		c.named[pair] = false
		saved, before := c.path, len(c.found)
		c.path = append([]string{"#"}, strings.Split(wl, ".")...)
		c.compareMessage(w, r)
		c.path = saved
		incompatible = len(c.found) > before
		c.named[pair] = incompatible
	}
	if incompatible {
		c.add(kindFieldNamedTypeChanged, fmt.Sprintf("The field's message type %s differs incompatibly between the writer's and the reader's schemas.", w.FullName()))
	}
}

// scalar groups are the types the wire reads as one another (Confluent's
// ScalarKind, after protobuf's "Updating A Message Type" rules).
type scalarGroupID int

const (
	groupGeneralNumber scalarGroupID = iota
	groupSignedNumber
	groupStringOrBytes
	groupFixed32
	groupFixed64
	groupFloat
	groupDouble
)

func scalarGroup(f protoreflect.FieldDescriptor) scalarGroupID {
	switch f.Kind() {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return groupSignedNumber
	case protoreflect.StringKind, protoreflect.BytesKind:
		return groupStringOrBytes
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return groupFixed32
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return groupFixed64
	case protoreflect.FloatKind:
		return groupFloat
	case protoreflect.DoubleKind:
		return groupDouble
	default:
		// int32, int64, uint32, uint64, bool and enums: plain varints.
		return groupGeneralNumber
	}
}

// explicitLabel is the label as the text writes it, which is what
// Confluent's text-based diff compares: none (0) for fields of a oneof, map
// fields and proto3's unlabelled singular fields.
func explicitLabel(f protoreflect.FieldDescriptor) protoreflect.Cardinality {
	if realOneof(f) != nil || f.IsMap() {
		return 0
	}
	if f.ParentFile().Syntax() == protoreflect.Proto3 {
		switch {
		case f.Cardinality() == protoreflect.Repeated:
			return protoreflect.Repeated
		case f.HasOptionalKeyword():
			return protoreflect.Optional
		default:
			return 0
		}
	}
	return f.Cardinality()
}

func describe(f protoreflect.FieldDescriptor) string {
	switch kindOf(f) {
	case kindMap:
		return "a map"
	case kindMessage:
		return "message " + string(f.Message().FullName())
	}
	if f.Kind() == protoreflect.EnumKind {
		return "enum " + string(f.Enum().FullName())
	}
	return f.Kind().String()
}

// localName is a type's name within its package, which Confluent compares
// (a type's package is the file's, compared once as PACKAGE_CHANGED).
func localName(m protoreflect.MessageDescriptor) string {
	full, pkg := string(m.FullName()), string(m.ParentFile().Package())
	if pkg != "" {
		return strings.TrimPrefix(full, pkg+".")
	}
	return full
}

func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

func fieldInOneof(o protoreflect.OneofDescriptor, n protoreflect.FieldNumber) protoreflect.FieldDescriptor {
	for i := 0; i < o.Fields().Len(); i++ {
		if f := o.Fields().Get(i); f.Number() == n {
			return f
		}
	}
	return nil
}

func unionNumbers(a, b map[protoreflect.FieldNumber]protoreflect.FieldDescriptor) []protoreflect.FieldNumber {
	numbers := make([]protoreflect.FieldNumber, 0, len(a)+len(b))
	for n := range a {
		numbers = append(numbers, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			numbers = append(numbers, n)
		}
	}
	slices.Sort(numbers)
	return numbers
}
