package broker

import (
	"log/slog"
	"testing"
	"time"

	"millrace/broker/quota"
	"millrace/internal/waitfor"
)

// TestQuotasFollowTheStore: the broker's quota manager loads the quotas
// stored before it opened and applies a change written to the store
// (by any broker's AlterClientQuotas) within 2 s.
func TestQuotasFollowTheStore(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Listener = "127.0.0.1:0"
	cfg.Kafka.BrokerID = 1
	b, err := Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	manager := b.quotas.Manager()
	if _, _, ok := manager.Resolve(quota.ProducerByteRate, "alice", "app"); ok {
		t.Fatal("a quota applies in a new cluster")
	}
	if err := quota.Alter(b.store, quota.UserEntity("alice"), map[quota.Kind]float64{quota.ProducerByteRate: 1024}, nil); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 2*time.Second, "the broker applying alice's quota", func() bool {
		bound, _, ok := manager.Resolve(quota.ProducerByteRate, "alice", "app")
		return ok && bound == 1024
	})
}
