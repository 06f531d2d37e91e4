package interbroker

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"
	"millrace/broker/replication"
)

// TestMovedToRemote: which leader answers restart a follower's log from
// remote storage. OFFSET_MOVED_TO_TIERED_STORAGE always does (KIP-405);
// OFFSET_OUT_OF_RANGE only on a tiered partition whose leader's log start
// is past the follower's end (its records left remote storage too); any
// other answer is handled as before.
func TestMovedToRemote(t *testing.T) {
	t.Parallel()
	open := func(tiered bool) *fetchedPartition {
		cfg := log.DefaultConfig()
		cfg.RemoteStorageEnable = tiered
		l, err := log.Open(t.TempDir(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return &fetchedPartition{p: &replication.Followed{TopicPartition: log.TopicPartition{Topic: "t"}, Log: l}}
	}
	tiered, plain := open(true), open(false)
	for _, c := range []struct {
		name     string
		fp       *fetchedPartition
		code     int16
		logStart int64
		want     bool
	}{
		{"moved to tiered storage", tiered, kerr.OffsetMovedToTieredStorage.Code, 10, true},
		{"out of range below the leader's start, tiered", tiered, kerr.OffsetOutOfRange.Code, 10, true},
		{"out of range past the leader's end, tiered", tiered, kerr.OffsetOutOfRange.Code, 0, false},
		{"out of range below the leader's start, not tiered", plain, kerr.OffsetOutOfRange.Code, 10, false},
		{"no error", tiered, 0, 10, false},
		{"another error", tiered, kerr.NotLeaderForPartition.Code, 10, false},
	} {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.ErrorCode, sp.LogStartOffset = c.code, c.logStart
		if got := movedToRemote(c.fp, &sp); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRebuildFromRemote: the fetcher hands the leader's local log start to
// the injected rebuild, not for a removed partition, and without tiered
// storage reports why the partition cannot follow.
func TestRebuildFromRemote(t *testing.T) {
	t.Parallel()
	l, err := log.Open(t.TempDir(), log.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fp := &fetchedPartition{p: &replication.Followed{TopicPartition: log.TopicPartition{Topic: "t"}, Log: l}}
	fs := &Fetchers{logger: slog.New(slog.DiscardHandler)}
	lf := &leaderFetcher{fs: fs}
	if err := lf.rebuildFromRemote(context.Background(), fp, 7); !errors.Is(err, errNoTieredStorage) {
		t.Fatalf("without tiered storage: %v", err)
	}
	var starts []int64
	fs.RebuildFromRemote(func(_ context.Context, p *replication.Followed, start int64) error {
		starts = append(starts, start)
		return errors.New("store down")
	})
	if err := lf.rebuildFromRemote(context.Background(), fp, 7); !errors.Is(err, errRetry) {
		t.Fatalf("a failed rebuild: %v, want a retry", err)
	}
	fp.removed = true
	if err := lf.rebuildFromRemote(context.Background(), fp, 8); err != nil {
		t.Fatal(err)
	}
	if len(starts) != 1 || starts[0] != 7 {
		t.Fatalf("rebuilds at %v, want one at 7", starts)
	}
}
