package avro

import (
	"strings"

	lib "github.com/twmb/avro"
)

// names indexes the named types (record, enum, fixed) of one schema's
// SchemaNode tree by full name. The tree writes a named type out at its
// first use and names it everywhere else, as the text did; the checker, the
// codec and the normalized form follow those names through the index.
type names struct {
	defs map[string]*lib.SchemaNode
}

// indexNames walks tree once. It also returns how deeply records, arrays
// and maps nest in it (a union is no level of its own: ["null", T] is T),
// which Parse holds against Limits.MaxDepth. The tree's depth is already
// bounded by the text's JSON nesting, which Parse checked first.
func indexNames(tree *lib.SchemaNode) (*names, int) {
	x := &names{defs: make(map[string]*lib.SchemaNode)}
	return x, x.walk(tree)
}

func (x *names) walk(n *lib.SchemaNode) int {
	if isNamedKind(n.Type) {
		x.defs[fullName(n)] = n
	}
	deepest := 0
	visit := func(c *lib.SchemaNode) { deepest = max(deepest, x.walk(c)) }
	for i := range n.Fields {
		visit(&n.Fields[i].Type)
	}
	for i := range n.Branches {
		visit(&n.Branches[i])
	}
	if n.Items != nil {
		visit(n.Items)
	}
	if n.Values != nil {
		visit(n.Values)
	}
	switch n.Type {
	case "record", "error", "array", "map":
		return deepest + 1
	}
	return deepest
}

// resolve returns the node n stands for, seen from namespace ns: the
// definition when n is a name, n itself otherwise; and the namespace n's own
// children are read in. ok is false for a name the schema does not define,
// which a parsed schema never has.
func (x *names) resolve(n *lib.SchemaNode, ns string) (def *lib.SchemaNode, childNS string, ok bool) {
	if isStructural(n.Type) {
		if isNamedKind(n.Type) {
			return n, namespaceOf(fullName(n)), true
		}
		return n, ns, true
	}
	full := qualify(n.Type, ns)
	if d, found := x.defs[full]; found {
		return d, namespaceOf(full), true
	}
	// A short name in a namespaced scope may still name a type of the
	// null namespace.
	if d, found := x.defs[n.Type]; found {
		return d, "", true
	}
	return nil, ns, false
}

// fullName is a named type's namespace-qualified name.
func fullName(n *lib.SchemaNode) string {
	if strings.Contains(n.Name, ".") || n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "." + n.Name
}

// qualify reads name (of a type or an alias) in namespace ns.
func qualify(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

func namespaceOf(full string) string {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i]
	}
	return ""
}

func shortName(full string) string {
	return full[strings.LastIndexByte(full, '.')+1:]
}

func isNamedKind(t string) bool {
	switch t {
	case "record", "error", "enum", "fixed":
		return true
	}
	return false
}

func isPrimitive(t string) bool {
	switch t {
	case "null", "boolean", "int", "long", "float", "double", "bytes", "string":
		return true
	}
	return false
}

// isStructural reports whether t is a type keyword rather than a name.
func isStructural(t string) bool {
	return isPrimitive(t) || isNamedKind(t) || t == "array" || t == "map" || t == "union"
}

// kind is t with "error", the RPC spelling of a record, read as "record".
func kind(t string) string {
	if t == "error" {
		return "record"
	}
	return t
}
