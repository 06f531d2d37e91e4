package otlp

import "fmt"

// maxJSONDepth bounds a JSON body's nesting: an AnyValue kvlist nests
// four JSON levels a level ({"kvlistValue":{"values":[{"value":{...), so
// this allows what pdata's protobuf decoder allows (100 nested messages)
// with room for the envelope.
const maxJSONDepth = 410

// checkJSONDepth refuses a body nested deeper than limit objects and
// arrays, counted in one pass without decoding, so a body of a few
// megabytes of brackets cannot make the decoder recurse millions deep.
func checkJSONDepth(b []byte, limit int) error {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
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
		case c == '{' || c == '[':
			depth++
			if depth > limit {
				return fmt.Errorf("the JSON body nests deeper than %d levels", limit)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
