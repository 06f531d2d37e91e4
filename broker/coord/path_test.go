package coord

import (
	"errors"
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
