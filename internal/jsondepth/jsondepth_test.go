package jsondepth

import (
	"strings"
	"testing"
)

func TestExceeds(t *testing.T) {
	for _, c := range []struct {
		text   string
		limit  int
		at     int
		deeper bool
	}{
		{`{}`, 1, 0, false},
		{`{"a":[1]}`, 1, 5, true},
		{`{"a":[1]}`, 2, 0, false},
		// Brackets inside strings, escaped quotes included, do not count.
		{`{"a":"[[[{{\"[["}`, 1, 0, false},
		{`[[` + `"\\"` + `[`, 2, 6, true},
		// Closing brackets bring the depth back: siblings do not add up.
		{`[[],[],[]]`, 2, 0, false},
		{strings.Repeat("[", 1000), 999, 999, true},
	} {
		at, deeper := Exceeds(c.text, c.limit)
		if at != c.at || deeper != c.deeper {
			t.Errorf("Exceeds(%q, %d) = %d, %v; want %d, %v", c.text, c.limit, at, deeper, c.at, c.deeper)
		}
		if at2, deeper2 := Exceeds([]byte(c.text), c.limit); at2 != at || deeper2 != deeper {
			t.Errorf("Exceeds of the bytes of %q differs from the string's", c.text)
		}
	}
}
