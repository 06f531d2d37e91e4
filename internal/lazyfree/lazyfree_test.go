package lazyfree

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestWithSetting(t *testing.T) {
	for _, c := range []struct {
		name    string
		environ []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"HOME=/root"}, []string{"HOME=/root", "GODEBUG=madvdontneed=0"}, true},
		{"other settings kept", []string{"GODEBUG=gctrace=1", "PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=gctrace=1,madvdontneed=0"}, true},
		{"already set", []string{"GODEBUG=madvdontneed=0"}, []string{"GODEBUG=madvdontneed=0"}, false},
		{"operator chose DONTNEED", []string{"GODEBUG=gctrace=1,madvdontneed=1"}, []string{"GODEBUG=gctrace=1,madvdontneed=1"}, false},
	} {
		got, changed := withSetting(c.environ)
		if changed != c.changed || !slices.Equal(got, c.want) {
			t.Errorf("%s: withSetting(%q) = %q, %v; want %q, %v", c.name, c.environ, got, changed, c.want, c.changed)
		}
	}
}

// TestReexec runs this test binary as a child that calls Reexec and prints
// its GODEBUG: the re-executed process must have the setting, once.
func TestReexec(t *testing.T) {
	if os.Getenv("LAZYFREE_CHILD") == "1" {
		if err := Reexec(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("GODEBUG=" + os.Getenv("GODEBUG") + "\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReexec$", "-test.v")
	cmd.Env = append(os.Environ(), "LAZYFREE_CHILD=1", "GODEBUG=gctrace=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "GODEBUG=gctrace=0,madvdontneed=0\n") {
		t.Fatalf("child's GODEBUG after Reexec is not gctrace=0,madvdontneed=0:\n%s", out)
	}
}
