package broker

import "testing"

// TestCompactedMaxKeyBytesSetting: the broker-wide name of the compacted
// topics' key bound reaches the topic defaults, and a bound below 1 is
// refused.
func TestCompactedMaxKeyBytesSetting(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	if c.Log.CompactedMaxKeyBytes != 64<<10 {
		t.Fatalf("default %d, want 64 KiB", c.Log.CompactedMaxKeyBytes)
	}
	if err := c.Set("millrace.log.compacted.max.key.bytes", "1024"); err != nil {
		t.Fatal(err)
	}
	if c.Log.CompactedMaxKeyBytes != 1024 {
		t.Fatalf("setting did not reach the log config: %d", c.Log.CompactedMaxKeyBytes)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("millrace.log.compacted.max.key.bytes", "0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil {
		t.Fatal("a key bound of 0 was accepted")
	}
}
