package cli

import (
	"testing"

	"millrace/agents/ship"
)

func TestTailShipDefaults(t *testing.T) {
	for _, c := range []struct {
		name string
		in   ship.Config
		want int
	}{
		{"unset", ship.Config{}, tailBufferedBytes},
		{"set", ship.Config{MaxBufferedBytes: 64 << 20}, 64 << 20},
		{"large batches", ship.Config{MaxBatchBytes: 4 << 20}, 16 << 20},
	} {
		got := tailShipDefaults(c.in)
		if got.MaxBufferedBytes != c.want {
			t.Errorf("%s: max_buffered_bytes %d, want %d", c.name, got.MaxBufferedBytes, c.want)
		}
		got.Brokers = []string{"a:1"}
		if err := got.WithDefaults().Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestTailMemoryLimitLeavesRoomAboveAFullBuffer(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	cfg := tailShipDefaults(ship.Config{}).WithDefaults()
	limit, ok := tailMemoryLimit(cfg)
	// The buffer counts its records' memory; above it and the batches
	// being sent the collector needs room or it never rests, but not so
	// much that the heap can outgrow the tailer's memory targets.
	busy := int64(cfg.MaxBufferedBytes) + 4*int64(cfg.MaxBatchBytes)
	if !ok || limit < busy+12<<20 || limit > busy+32<<20 {
		t.Fatalf("limit %d (set %v) for a %d-byte buffer", limit, ok, cfg.MaxBufferedBytes)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if _, ok := tailMemoryLimit(cfg); ok {
		t.Fatal("GOMEMLIMIT from the environment was overridden")
	}
}
