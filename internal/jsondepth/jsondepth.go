// Package jsondepth measures how deep JSON text nests its arrays and
// objects without decoding it, so a receiver can refuse a body of a few
// megabytes of brackets before a recursive decoder walks it.
package jsondepth

// Exceeds reports whether text nests arrays and objects deeper than limit,
// and if so the byte offset of the bracket that went past it. It reads
// bytes only (strings skipped, escapes honoured), one pass whatever the
// text holds; malformed JSON is left to the decoder to describe.
func Exceeds[T string | []byte](text T, limit int) (at int, deeper bool) {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > limit {
				return i, true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return 0, false
}
