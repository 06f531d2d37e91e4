package replication

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"millrace/broker/log"
)

func TestHighWatermarkCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), HighWatermarkCheckpointFile)
	if got, err := readHighWatermarks(path); err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v, want no entries and no error", got, err)
	}
	want := map[log.TopicPartition]int64{{Topic: "orders", Partition: 0}: 1234, {Topic: "orders", Partition: 11}: 0, {Topic: "a.b_c-d", Partition: 3}: 1 << 40}
	for range 2 { // the second write replaces the first
		if err := writeHighWatermarks(path, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readHighWatermarks(path)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("read back %v %v, want %v", got, err, want)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp file left behind: %v", err)
	}
	if err := writeHighWatermarks(path, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := readHighWatermarks(path); err != nil || len(got) != 0 {
		t.Fatalf("empty checkpoint: %v %v", got, err)
	}
}

func TestHighWatermarkCheckpointRejectsDamage(t *testing.T) {
	for name, content := range map[string]string{
		"empty":               "",
		"torn in the header":  "0\n",
		"torn in an entry":    "0\n1\norders 0 12",
		"entry missing":       "0\n2\norders 0 12\n",
		"extra entry":         "0\n1\norders 0 12\norders 1 5\n",
		"unknown version":     "1\n1\norders 0 12\n",
		"not a number":        "0\n1\norders 0 x\n",
		"negative offset":     "0\n1\norders 0 -1\n",
		"negative partition":  "0\n1\norders -1 5\n",
		"bad topic":           "0\n1\nor/ders 0 5\n",
		"extra field":         "0\n1\norders 0 5 7\n",
		"duplicate partition": "0\n2\norders 0 5\norders 0 6\n",
		"binary garbage":      "\x00\x01\x02\n",
	} {
		path := filepath.Join(t.TempDir(), HighWatermarkCheckpointFile)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := readHighWatermarks(path); !errors.Is(err, errBadCheckpoint) {
			t.Errorf("%s: %v %v, want errBadCheckpoint", name, got, err)
		}
	}
}
