package tail

import (
	"os"
	"path/filepath"
	"testing"

	"millrace/agents/ship"
)

// TestKeyStaysWithTheFile: the record key is the path a file was first
// found at, for the file's whole life: after a kill, a rename and a
// restart, every line of the old file (re-sent or new) carries the key and
// source it had before, so all of them reach one partition, as the sink's
// per-file dedup watermark needs; the new file at the path shares the key.
func TestKeyStaysWithTheFile(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "old", 0, 100)
	h := start(t, c, testConfig(dir, data), ship.Config{})
	cons := newConsumer(t, c)
	first := cons.waitFor(t, 100)
	h.kill()
	renamed := filepath.Join(dir, "app-1.log") // still matches *.log
	if err := os.Rename(path, renamed); err != nil {
		t.Fatal(err)
	}
	appendLines(t, renamed, "old", 100, 120)
	appendLines(t, path, "new", 0, 10)
	start(t, c, testConfig(dir, data), ship.Config{})
	got := cons.settle(t, 130)
	wantLines(t, got, "old", 0, 120)
	wantLines(t, got, "new", 0, 10)
	prefix := first[0].EventID[:16]
	for _, l := range got {
		if l.key != "web-1:"+path {
			t.Fatalf("line %q of %s has key %q, want web-1:%s", l.Line, l.Source, l.key, path)
		}
		if l.EventID[:16] == prefix && l.Source != path {
			t.Fatalf("line %q of the renamed file has source %q, want %s", l.Line, l.Source, path)
		}
	}
}
