package jsonschema

import "fmt"

// Bounds on number literals, in schemas and in values. Both the compiler and
// the validator turn numbers into exact rationals (math/big), whose cost
// grows with the exponent: 1e-99999999 is a short text and an enormous
// number. Nothing real needs more than float64's range or a hundred digits.
const (
	maxNumberBytes    = 100 // length of one number literal
	maxExponentDigits = 3   // digits of its exponent, so |exponent| < 1000
)

// scan bounds what decoding data may cost before anything is decoded: array
// and object nesting deeper than maxDepth, and number literals beyond the
// bounds above, are refused. It is one pass with no recursion and no
// allocation, so a hostile document 100,000 levels deep is refused in
// microseconds. Invalid JSON is left for the decoder to report.
func scan(data []byte, maxDepth int) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			// Skip the string: a backslash escapes the byte after it.
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case c == '[' || c == '{':
			depth++
			if depth > maxDepth {
				return fmt.Errorf("nests arrays and objects more than %d deep", maxDepth)
			}
		case c == ']' || c == '}':
			depth--
		case c == '-' || (c >= '0' && c <= '9'):
			end, err := scanNumber(data, i)
			if err != nil {
				return err
			}
			i = end - 1
		}
	}
	return nil
}

// scanNumber checks the number literal starting at start and returns the
// index after it.
func scanNumber(data []byte, start int) (int, error) {
	end := start
	exponentDigits := -1 // -1 until an exponent starts
literal:
	for ; end < len(data); end++ {
		switch c := data[end]; {
		case c >= '0' && c <= '9':
			if exponentDigits >= 0 && (exponentDigits > 0 || c != '0') {
				exponentDigits++
			}
		case c == 'e' || c == 'E':
			exponentDigits = 0
		case c == '-' || c == '+' || c == '.':
		default:
			break literal
		}
	}
	if end-start > maxNumberBytes {
		return 0, fmt.Errorf("has a number literal of %d bytes, more than the limit of %d", end-start, maxNumberBytes)
	}
	if exponentDigits > maxExponentDigits {
		return 0, fmt.Errorf("has a number whose exponent has more than %d digits (%s)", maxExponentDigits, data[start:end])
	}
	return end, nil
}
