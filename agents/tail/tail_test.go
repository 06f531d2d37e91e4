package tail

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

func TestRecordFormat(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "a", 0, 3)
	cfg := testConfig(dir, data)
	cfg.Fields = map[string]string{"env": "prod"}
	start(t, c, cfg, ship.Config{})
	got := newConsumer(t, c).settle(t, 3)
	if len(got) != 3 {
		t.Fatalf("got %d records, want 3", len(got))
	}
	var off int64
	for _, l := range got {
		if l.Offset != off {
			t.Fatalf("offset %d, want %d (records %+v)", l.Offset, off, got)
		}
		off += int64(len(l.Line)) + 1
		if _, err := hex.DecodeString(l.EventID); err != nil || len(l.EventID) != 32 {
			t.Fatalf("event_id %q is not 32 hex chars", l.EventID)
		}
		if l.header != l.EventID {
			t.Fatalf("header event_id %q differs from field %q", l.header, l.EventID)
		}
		if l.key != "web-1:"+path || l.Host != "web-1" || l.Source != path || l.Fields["env"] != "prod" {
			t.Fatalf("unexpected record %+v", l)
		}
		if ts, err := time.Parse(time.RFC3339Nano, l.TS); err != nil || ts.Location() != time.UTC {
			t.Fatalf("ts %q is not RFC 3339 UTC: %v", l.TS, err)
		}
	}
	if !strings.HasPrefix(got[0].Line, "a line 000000") {
		t.Fatalf("first line %q", got[0].Line)
	}
}

func TestRotationByRename(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "old", 0, 100)
	cfg := testConfig(dir, data)
	start(t, c, cfg, ship.Config{})
	cons := newConsumer(t, c)
	cons.waitFor(t, 100)
	// The writer still holds the old file while the new one appears: the
	// tail of the old file must not be lost, and comes before the new one.
	old, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, filepath.Join(dir, "app.log.1")); err != nil {
		t.Fatal(err)
	}
	if _, err := old.WriteString("old line 000100\nold line 000101\n"); err != nil {
		t.Fatal(err)
	}
	old.Close()
	appendLines(t, path, "new", 0, 50)
	got := cons.settle(t, 152)
	wantLines(t, got, "old", 0, 102)
	wantLines(t, got, "new", 0, 50)
	if len(got) != 152 {
		t.Fatalf("got %d records, want 152 (no duplicates without a crash)", len(got))
	}
	ids := map[string]bool{}
	for _, l := range got {
		if ids[l.EventID] {
			t.Fatalf("event_id %s used twice", l.EventID)
		}
		ids[l.EventID] = true
	}
}

func TestCopyTruncate(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "before", 0, 100)
	start(t, c, testConfig(dir, data), ship.Config{})
	cons := newConsumer(t, c)
	first := cons.waitFor(t, 100)
	oldIDs := map[int64]string{}
	for _, l := range first {
		oldIDs[l.Offset] = l.EventID
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendLines(t, path, "after", 0, 20)
	got := cons.settle(t, 120)
	wantLines(t, got, "after", 0, 20)
	if len(got) != 120 {
		t.Fatalf("got %d records, want 120", len(got))
	}
	for _, l := range got[100:] {
		if oldIDs[l.Offset] == l.EventID {
			t.Fatalf("line after truncation at offset %d reuses the old event_id", l.Offset)
		}
	}
}

func TestInodeReuseWithDifferentFingerprint(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "first", 0, 100) // > fingerprint_bytes
	h := start(t, c, testConfig(dir, data), ship.Config{})
	cons := newConsumer(t, c)
	cons.waitFor(t, 100)
	h.stop()
	size := registryOffset(t, data, path)
	if size <= 0 {
		t.Fatalf("registry offset %d after a clean stop", size)
	}
	// Same device and inode, other content, longer than the checkpoint:
	// only the fingerprint can tell it is not the old file.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	appendLines(t, path, "second", 0, 150)
	start(t, c, testConfig(dir, data), ship.Config{})
	got := cons.settle(t, 250)
	wantLines(t, got, "second", 0, 150)
	if len(got) != 250 {
		t.Fatalf("got %d records, want 250", len(got))
	}
}

func TestStartPositionEnd(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "ignored", 0, 10)
	cfg := testConfig(dir, data)
	cfg.StartPosition = "end"
	h := start(t, c, cfg, ship.Config{})
	waitfor.Until(t, 20*time.Second, "the file to be followed", func() bool { return registryOffset(t, data, path) > 0 })
	appendLines(t, path, "wanted", 0, 5)
	// A file created after start is read from its beginning.
	appendLines(t, filepath.Join(dir, "late.log"), "late", 0, 5)
	got := newConsumer(t, c).settle(t, 10)
	h.stop()
	if len(got) != 10 {
		t.Fatalf("got %d records, want 10: %+v", len(got), got)
	}
	wantLines(t, got, "wanted", 0, 5)
	wantLines(t, got, "late", 0, 5)
}

func TestValidateConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"ok", func(*Config) {}, ""},
		{"no paths", func(c *Config) { c.Paths = nil }, "paths"},
		{"bad glob", func(c *Config) { c.Paths = []string{"/var/log/[.log"} }, "pattern"},
		{"no topic", func(c *Config) { c.Topic = "" }, "topic"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "data_dir"},
		{"bad start", func(c *Config) { c.StartPosition = "middle" }, "start_position"},
		{"bad multiline", func(c *Config) { c.Multiline.StartPattern = "(" }, "multiline"},
		{"negative", func(c *Config) { c.CloseInactive = -time.Second }, "close_inactive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Paths: []string{"/var/log/*.log"}, Topic: "t", DataDir: "/tmp/x"}
			tc.mod(&cfg)
			err := cfg.WithDefaults().Validate()
			if tc.want == "" && err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
