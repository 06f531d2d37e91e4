package broker

import (
	"strings"
	"testing"
	"time"
)

func TestCleanerSettings(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	if !c.Cleaner.Enable || c.Cleaner.Threads != 1 || c.Cleaner.DedupeBufferSize != 128<<20 || c.Cleaner.Backoff != 15*time.Second {
		t.Fatalf("defaults: %+v", c.Cleaner)
	}
	for name, value := range map[string]string{
		"log.cleaner.enable": "false", "log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": "1048576",
		"log.cleaner.dedupe.buffer.size": "4194304", "log.cleaner.backoff.ms": "500",
	} {
		if err := c.Set(name, value); err != nil {
			t.Fatalf("%s=%s: %v", name, value, err)
		}
	}
	if c.Cleaner.Enable || c.Cleaner.Threads != 2 || c.Cleaner.IOMaxBytesPerSecond != 1<<20 || c.Cleaner.DedupeBufferSize != 4<<20 || c.Cleaner.Backoff != 500*time.Millisecond {
		t.Fatalf("after Set: %+v", c.Cleaner)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{"log.cleaner.enable": "maybe", "log.cleaner.threads": "0", "log.cleaner.io.max.bytes.per.second": "fast"} {
		if err := c.Set(name, value); err == nil {
			t.Errorf("%s=%s accepted", name, value)
		}
	}
	c.Cleaner.DedupeBufferSize = 1 << 20 // less than 1 MiB for each of 2 threads
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "log.cleaner.dedupe.buffer.size") {
		t.Fatalf("validate: %v", err)
	}
}
