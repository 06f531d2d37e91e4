package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/tier"
	"millrace/internal/waitfor"
)

// TestTieredTopicKeepsOnlyTheTailLocally: a broker with a file:// remote
// store uploads the closed segments of a remote.storage.enable topic,
// records them in the remote state, and its local retention
// (local.retention.bytes=1) then keeps only what is not remote yet;
// DeleteRecords moves the remote log start. A compacted topic, and any
// tiered topic on a broker without tiered storage, is refused with
// INVALID_CONFIG, as in Kafka.
func TestTieredTopicKeepsOnlyTheTailLocally(t *testing.T) {
	t.Parallel()
	b, cl := startTieredBroker(t)
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	resp, err := adm.CreateTopic(ctx, 1, 1, tieredTopicConfig(), "tiered")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// kadm's CreateTopic returns the topic's error as its own too.
	compacted, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true"), "cleanup.policy": ptr("compact")}, "compacted")
	if !errors.Is(compacted.Err, kerr.InvalidConfig) {
		t.Fatalf("tiered compacted topic: %v; want INVALID_CONFIG", compacted.Err)
	}
	produceN(t, cl, "tiered", 30)

	_, l, _ := b.cluster.Partition("tiered", 0)
	var st tier.State
	waitfor.Until(t, 20*time.Second, "the closed segments remote and deleted locally", func() bool {
		st, _, _, err = tier.ReadState(b.store, "tiered", 0)
		if err != nil {
			t.Fatal(err)
		}
		segments := l.Segments()
		return len(st.Segments) > 2 && len(segments) == 1 && l.StartOffset() == st.End()
	})
	if st.LogStartOffset != 0 || st.Segments[0].BaseOffset != 0 {
		t.Fatalf("remote state %+v does not start at 0", st)
	}
	for i := 1; i < len(st.Segments); i++ {
		if st.Segments[i].BaseOffset != st.Segments[i-1].LastOffset+1 {
			t.Fatalf("remote segments not contiguous: %+v", st.Segments)
		}
	}

	deleted, err := adm.DeleteRecords(ctx, kadm.Offsets{"tiered": {0: {At: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := deleted.Lookup("tiered", 0); r.Err != nil || r.LowWatermark != 2 {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	if st, _, _, _ := tier.ReadState(b.store, "tiered", 0); st.LogStartOffset != 2 {
		t.Fatalf("remote log start %d after DeleteRecords to 2", st.LogStartOffset)
	}

	// Turning tiering off on the topic would orphan its remote data:
	// refused, as Kafka refuses it without remote.log.delete.on.disable.
	off, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: ptr("false")}}, "tiered")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := off.On("tiered", nil); !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, "cannot be turned off") {
		t.Fatalf("remote.storage.enable=false on a tiered topic: %v %q; want INVALID_CONFIG", r.Err, r.ErrMessage)
	}

	// A broker without tiered storage refuses the setting.
	plain := DefaultConfig()
	plain.DataDir = t.TempDir()
	plain.Kafka.Listener = "127.0.0.1:0"
	other, stopOther := runBroker(t, plain, slog.New(slog.DiscardHandler))
	defer stopOther()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(other.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	refused, _ := kadm.NewClient(cl2).CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": ptr("true")}, "tiered")
	if !errors.Is(refused.Err, kerr.InvalidConfig) || !strings.Contains(refused.ErrMessage, "remote.log.storage.system.enable") {
		t.Fatalf("tiered topic without tiered storage: %v %q; want INVALID_CONFIG", refused.Err, refused.ErrMessage)
	}
}

func ptr(s string) *string { return &s }

// startTieredBroker runs a broker whose remote storage is a file:// store
// in a temporary directory, uploading and enforcing retention every 20 ms,
// and returns it with a client of it; both stop when the test ends.
func startTieredBroker(t *testing.T) (*Broker, *kgo.Client) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Listener = "127.0.0.1:0"
	cfg.RetentionCheckInterval = 20 * time.Millisecond
	cfg.Tier.Enable, cfg.Tier.URL = true, "file://"+t.TempDir()
	cfg.Tier.TaskInterval = 20 * time.Millisecond
	b, stop := runBroker(t, cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(stop)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, cl
}

// tieredTopicConfig is a topic that tiers every closed segment of its
// 400-byte segments and keeps only the active one locally.
func tieredTopicConfig() map[string]*string {
	return map[string]*string{"remote.storage.enable": ptr("true"), "segment.bytes": ptr("400"), "local.retention.bytes": ptr("1")}
}
