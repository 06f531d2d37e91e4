package coord

import (
	"errors"
	"strings"
	"testing"
)

func TestValidatePath(t *testing.T) {
	for _, tc := range []struct {
		path       string
		ok         bool
		sequential bool // also valid as a sequential prefix
	}{
		{"/", true, true},
		{"/a", true, true},
		{"/a/b-c.d_e", true, true},
		{"/brokers/ids/1", true, true},
		{"/a/...", true, true},
		{"/a/", false, true},
		{"", false, false},
		{"a", false, false},
		{"//", false, false},
		{"/a/..", false, true}, // "/a/..0000000001" is a fine name
		{"/a/./b", false, false},
		{"/a/../b", false, false},
		{"/a/..", false, true}, // "/a/..0000000001" is a fine name
		{"/a\x00", false, false},
		{"/a\nb", false, false},
	} {
		err := ValidatePath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("ValidatePath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadPath) {
			t.Errorf("ValidatePath(%q) = %v, not ErrBadPath", tc.path, err)
		}
		err = ValidateCreatePath(tc.path, PersistentSequential)
		if (err == nil) != tc.sequential {
			t.Errorf("ValidateCreatePath(%q, sequential) = %v, want ok=%v", tc.path, err, tc.sequential)
		}
		if err := ValidateCreatePath(tc.path, Ephemeral); (err == nil) != tc.ok {
			t.Errorf("ValidateCreatePath(%q, ephemeral) = %v, want ok=%v", tc.path, err, tc.ok)
		}
	}
}

func TestPathParts(t *testing.T) {
	for _, tc := range []struct{ path, parent, base string }{
		{"/a", "/", "a"},
		{"/a/b", "/a", "b"},
		{"/a/b/c", "/a/b", "c"},
		{"/a/", "/a", ""},
	} {
		if got := ParentPath(tc.path); got != tc.parent {
			t.Errorf("ParentPath(%q) = %q, want %q", tc.path, got, tc.parent)
		}
		if got := BaseName(tc.path); got != tc.base {
			t.Errorf("BaseName(%q) = %q, want %q", tc.path, got, tc.base)
		}
	}
	if got := JoinPath("/", "a"); got != "/a" {
		t.Errorf("JoinPath(/, a) = %q", got)
	}
	if got := JoinPath("/a", "b"); got != "/a/b" {
		t.Errorf("JoinPath(/a, b) = %q", got)
	}
}

func TestEscapeName(t *testing.T) {
	for _, name := range []string{"plain", "", ".", "..", "a/b", "100%", "x\x00y", "ünïcode", "\ufff5", "\xff"} {
		esc := EscapeName(name)
		if strings.Contains(esc, "/") || esc == "." || esc == ".." || esc == "" {
			t.Fatalf("EscapeName(%q) = %q is not one path component", name, esc)
		}
		if back, ok := UnescapeName(esc); !ok || back != name {
			t.Fatalf("UnescapeName(EscapeName(%q)) = %q, %v", name, back, ok)
		}
	}
	if EscapeName("my-topic.v2_x") != "my-topic.v2_x" {
		t.Fatal("Kafka topic names must not be escaped")
	}
}

func FuzzEscapeName(f *testing.F) {
	for _, s := range []string{"a", "", "..", "a/b", "%", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		esc := EscapeName(s)
		if back, ok := UnescapeName(esc); !ok || back != s {
			t.Fatalf("round trip of %q: %q %v", s, back, ok)
		}
		if strings.ContainsAny(esc, "/") {
			t.Fatalf("escaped %q contains a slash", esc)
		}
		UnescapeName(s) // must not panic on arbitrary input
	})
}
