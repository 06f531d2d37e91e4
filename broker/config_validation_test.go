package broker

import (
	"testing"
	"time"
)

// TestValidationSettings: the broker-level names of the timestamp bounds
// and the decompression bound reach the topic defaults, and a bound below
// max.message.bytes is refused.
func TestValidationSettings(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	for name, value := range map[string]string{
		"log.message.timestamp.before.max.ms": "86400000",
		"log.message.timestamp.after.max.ms":  "60000",
		"millrace.log.max.decompressed.bytes": "33554432",
	} {
		if err := c.Set(name, value); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if c.Log.MessageTimestampBeforeMax != 24*time.Hour || c.Log.MessageTimestampAfterMax != time.Minute || c.Log.MaxDecompressedBytes != 32<<20 {
		t.Fatalf("settings did not reach the log config: %+v", c.Log)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("millrace.log.max.decompressed.bytes", "1000"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil {
		t.Fatal("a decompression bound below max.message.bytes was accepted")
	}
}
