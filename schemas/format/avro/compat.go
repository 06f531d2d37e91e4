package avro

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"millrace/schemas/format"

	lib "github.com/twmb/avro"
)

// The kinds of incompatibility, as Avro's SchemaCompatibility names them
// and Confluent's verbose compatibility messages carry them.
const (
	TypeMismatch                   = "TYPE_MISMATCH"
	NameMismatch                   = "NAME_MISMATCH"
	FixedSizeMismatch              = "FIXED_SIZE_MISMATCH"
	MissingEnumSymbols             = "MISSING_ENUM_SYMBOLS"
	ReaderFieldMissingDefaultValue = "READER_FIELD_MISSING_DEFAULT_VALUE"
	MissingUnionBranch             = "MISSING_UNION_BRANCH"
)

// ReadsFrom checks that a reader with s reads what writer wrote, by the rules
// of Avro's SchemaCompatibility (Java), which Confluent's Avro checker runs,
// and reports every problem with Java's kind and location (/fields/1/type,
// /symbols, /size, /name, /items, /values, /0 for a writer union's branch).
//
// The library's CheckCompatibility gives the same verdict for the cases the
// tests hold against it, but stops at the first problem, names its place by
// field names and has no kinds; the registry answers with all of them, as
// Confluent does, so the rules are walked here over the library's trees.
// Where Java and the library differ, this follows Java: a decimal's
// precision and scale are not compared, a writer union's branch the reader
// cannot read is one MISSING_UNION_BRANCH at that branch's index.
func (s *schema) ReadsFrom(writer format.Schema) []format.Incompat {
	w, ok := writer.(*schema)
	if !ok {
		return []format.Incompat{{Kind: TypeMismatch, Path: "/",
			Message: fmt.Sprintf("the writer's schema is %s, the reader's AVRO", writer.Type().Name())}}
	}
	c := checker{reader: s.names, writer: w.names, memo: make(map[nodePair]*memoEntry)}
	found := c.check(s.tree, "", w.tree, "", nil)
	// A pair met again (a named type used twice) reports what it found the
	// first time, once.
	var out []format.Incompat
	for _, in := range found {
		if !slices.Contains(out, in) {
			out = append(out, in)
		}
	}
	return out
}

type checker struct {
	reader, writer *names
	memo           map[nodePair]*memoEntry
}

type nodePair struct{ reader, writer *lib.SchemaNode }

// memoEntry is a pair's result; while the pair is being checked it is
// empty, which is how recursive types terminate: a pair met again inside
// itself is compatible unless shown otherwise, as in Java's checker.
type memoEntry struct{ found []format.Incompat }

func (c *checker) check(r *lib.SchemaNode, rns string, w *lib.SchemaNode, wns string, path []string) []format.Incompat {
	r, rns, rok := c.reader.resolve(r, rns)
	w, wns, wok := c.writer.resolve(w, wns)
	if !rok || !wok {
		return []format.Incompat{incompat(TypeMismatch, path, "a type is named but not defined")}
	}
	pair := nodePair{r, w}
	if e, seen := c.memo[pair]; seen {
		return e.found
	}
	e := &memoEntry{}
	c.memo[pair] = e
	e.found = c.calculate(r, rns, w, wns, path)
	return e.found
}

func (c *checker) calculate(r *lib.SchemaNode, rns string, w *lib.SchemaNode, wns string, path []string) []format.Incompat {
	rk, wk := kind(r.Type), kind(w.Type)
	if rk == wk {
		switch rk {
		case "array":
			return c.check(r.Items, rns, w.Items, wns, with(path, "items"))
		case "map":
			return c.check(r.Values, rns, w.Values, wns, with(path, "values"))
		case "fixed":
			found := c.names(r, w, path)
			if r.Size != w.Size {
				found = append(found, incompat(FixedSizeMismatch, with(path, "size"),
					fmt.Sprintf("the reader's fixed %q is %d bytes, the writer's %d", fullName(r), r.Size, w.Size)))
			}
			return found
		case "enum":
			return append(c.names(r, w, path), c.symbols(r, w, path)...)
		case "record":
			return append(c.names(r, w, path), c.fields(r, rns, w, wns, path)...)
		case "union":
			// Every branch the writer may have written must be readable.
			var found []format.Incompat
			for i := range w.Branches {
				at := with(path, strconv.Itoa(i))
				if len(c.check(r, rns, &w.Branches[i], wns, at)) > 0 {
					found = append(found, incompat(MissingUnionBranch, at,
						fmt.Sprintf("the reader's union has no branch that reads the writer's %s", describeType(&w.Branches[i]))))
				}
			}
			return found
		}
		return nil // the same primitive
	}
	if wk == "union" {
		var found []format.Incompat
		for i := range w.Branches {
			found = append(found, c.check(r, rns, &w.Branches[i], wns, path)...)
		}
		return found
	}
	switch rk {
	case "long":
		if wk == "int" {
			return nil
		}
	case "float":
		if wk == "int" || wk == "long" {
			return nil
		}
	case "double":
		if wk == "int" || wk == "long" || wk == "float" {
			return nil
		}
	case "bytes":
		if wk == "string" {
			return nil
		}
	case "string":
		if wk == "bytes" {
			return nil
		}
	case "union":
		for i := range r.Branches {
			if len(c.check(&r.Branches[i], rns, w, wns, path)) == 0 {
				return nil
			}
		}
		return []format.Incompat{incompat(MissingUnionBranch, path,
			fmt.Sprintf("the reader's union has no branch that reads the writer's %s", describeType(w)))}
	}
	return []format.Incompat{incompat(TypeMismatch, path,
		fmt.Sprintf("the reader's %s cannot read the writer's %s", describeType(r), describeType(w)))}
}

// names checks a named type's name: the same unqualified name, or a reader
// alias naming the writer's full name.
func (c *checker) names(r, w *lib.SchemaNode, path []string) []format.Incompat {
	rFull, wFull := fullName(r), fullName(w)
	if shortName(rFull) == shortName(wFull) {
		return nil
	}
	for _, alias := range r.Aliases {
		if qualify(alias, namespaceOf(rFull)) == wFull {
			return nil
		}
	}
	return []format.Incompat{incompat(NameMismatch, with(path, "name"),
		fmt.Sprintf("the reader's %s is named %q, the writer's %q, and no alias of the reader's names it", kind(r.Type), rFull, wFull))}
}

// symbols checks that the reader's enum has every writer symbol, unless it
// has a default to read the others as.
func (c *checker) symbols(r, w *lib.SchemaNode, path []string) []format.Incompat {
	var missing []string
	for _, sym := range w.Symbols {
		if !slices.Contains(r.Symbols, sym) {
			missing = append(missing, sym)
		}
	}
	if len(missing) == 0 || (r.HasEnumDefault && slices.Contains(r.Symbols, r.EnumDefault)) {
		return nil
	}
	slices.Sort(missing)
	return []format.Incompat{incompat(MissingEnumSymbols, with(path, "symbols"),
		fmt.Sprintf("the reader's enum %q lacks the writer's symbols [%s] and has no default", fullName(r), strings.Join(missing, ", ")))}
}

// fields matches each reader field to the writer's field of its name or of
// one of its aliases; a reader field the writer lacks needs a default.
func (c *checker) fields(r *lib.SchemaNode, rns string, w *lib.SchemaNode, wns string, path []string) []format.Incompat {
	byName := make(map[string]*lib.SchemaField, len(w.Fields))
	for i := range w.Fields {
		byName[w.Fields[i].Name] = &w.Fields[i]
	}
	var found []format.Incompat
	for i := range r.Fields {
		rf := &r.Fields[i]
		at := with(path, "fields", strconv.Itoa(i))
		wf := writerField(byName, rf)
		if wf == nil {
			if !rf.HasDefault {
				found = append(found, incompat(ReaderFieldMissingDefaultValue, at,
					fmt.Sprintf("the reader's field %q of record %q has no default and the writer's record lacks it", rf.Name, fullName(r))))
			}
			continue
		}
		found = append(found, c.check(&rf.Type, rns, &wf.Type, wns, with(at, "type"))...)
	}
	return found
}

// writerField is the writer's field of rf's name, else of its first alias
// the writer has.
func writerField(byName map[string]*lib.SchemaField, rf *lib.SchemaField) *lib.SchemaField {
	if wf, ok := byName[rf.Name]; ok {
		return wf
	}
	for _, alias := range rf.Aliases {
		if wf, ok := byName[alias]; ok {
			return wf
		}
	}
	return nil
}

func incompat(kind string, path []string, message string) format.Incompat {
	return format.Incompat{Kind: kind, Path: "/" + strings.Join(path, "/"), Message: message}
}

// with returns path extended, never sharing path's backing array.
func with(path []string, elems ...string) []string {
	return append(slices.Clip(path), elems...)
}

// describeType names a (resolved) type in a message: a named type by its
// full name, anything else by its type.
func describeType(n *lib.SchemaNode) string {
	if isNamedKind(n.Type) {
		return kind(n.Type) + " " + strconv.Quote(fullName(n))
	}
	if !isStructural(n.Type) {
		return strconv.Quote(n.Type)
	}
	return n.Type
}
