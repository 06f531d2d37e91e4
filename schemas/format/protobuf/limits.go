package protobuf

import (
	"fmt"
	"slices"

	"millrace/schemas/format"
)

// checkLimits refuses texts larger than limits.MaxBytes (the schema, and
// separately the sum of its references) or nested deeper than
// limits.MaxDepth, before the compiler sees them: the compiler's memory and
// its recursive walks grow with both.
func checkLimits(text string, refs map[string]string, limits format.Limits) error {
	if err := limits.CheckSizes(text, refs); err != nil {
		return fmt.Errorf("protobuf: %w", err)
	}
	names := make([]string, 0, len(refs))
	for name := range refs {
		names = append(names, name)
	}
	if line, col, deep := nestingBeyond(text, limits.MaxDepth); deep {
		return fmt.Errorf("the Protobuf schema nests deeper than the registry's limit of %d at %d:%d: %w", limits.MaxDepth, line, col, format.ErrLimit)
	}
	// Sorted, so the same refused set always names the same file.
	slices.Sort(names)
	for _, name := range names {
		if line, col, deep := nestingBeyond(refs[name], limits.MaxDepth); deep {
			return fmt.Errorf("the referenced file %q nests deeper than the registry's limit of %d at %d:%d: %w", name, limits.MaxDepth, line, col, format.ErrLimit)
		}
	}
	return nil
}

// nestingBeyond scans a .proto text once, counting brackets of every kind
// ({ for messages, enums, oneofs and option literals; [ ( < for options and
// text-format values) outside string literals and comments, and reports the
// line and column where the depth first exceeds maxDepth. It needs no
// memory beyond its counters, so any text can be scanned; a malformed text
// is left for the compiler to describe.
func nestingBeyond(text string, maxDepth int) (line, col int, deep bool) {
	depth := 0
	line, col = 1, 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		col++
		switch {
		case c == '\n':
			line, col = line+1, 0
		case c == '"' || c == '\'':
			// A string literal ends at its unescaped quote or at the end
			// of the line (the compiler refuses the latter).
			for i+1 < len(text) && text[i+1] != c && text[i+1] != '\n' {
				i++
				col++
				if text[i] == '\\' && i+1 < len(text) && text[i+1] != '\n' {
					i++
					col++
				}
			}
			if i+1 < len(text) && text[i+1] == c {
				i++
				col++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			for i+1 < len(text) && text[i+1] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			i += 2
			col += 2
			for i < len(text) && !(text[i] == '*' && i+1 < len(text) && text[i+1] == '/') {
				if text[i] == '\n' {
					line, col = line+1, 0
				} else {
					col++
				}
				i++
			}
			// Past the closing "*/" (the loop's i++ takes the '/').
			i++
			col++
		case c == '{' || c == '[' || c == '(' || c == '<':
			depth++
			if depth > maxDepth {
				return line, col, true
			}
		case c == '}' || c == ']' || c == ')' || c == '>':
			if depth > 0 {
				depth--
			}
		}
	}
	return 0, 0, false
}
