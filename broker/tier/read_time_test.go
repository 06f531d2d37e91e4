package tier

import (
	"context"
	"errors"
	"io"
	"testing"

	"millrace/broker/log"
	"millrace/internal/recordbatch"
)

// localEpoch is the leader epoch of the local batch holding offset.
func (tl *tieredLog) localEpoch(t *testing.T, offset int64) int32 {
	t.Helper()
	s, err := tl.local.Read(offset, 0, tl.local.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var hdr [recordbatch.HeaderSize]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		t.Fatal(err)
	}
	return recordbatch.HeaderAt(hdr[:]).PartitionLeaderEpoch
}

// A search by timestamp over the remote segments answers as broker/log's
// Log.OffsetForTimestamp over the same segments (Kafka's ListOffsets rule:
// the first record whose timestamp is at or after the target), for every
// timestamp from before the first record to past the last, with the
// leader epoch of the batch holding the answer; and EpochAt answers every
// offset's batch epoch.
func TestOffsetForTimestampMatchesLocal(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 60)
	r := NewRemoteReader(tl.index, newTestCache(t, tl.store, CacheConfig{}, nil))
	ctx := context.Background()
	last := tl.segments[len(tl.segments)-1]
	epochs := map[int32]bool{}
	for ts := int64(990); ts <= last.MaxTimestamp+2; ts++ {
		got, ok, err := r.OffsetForTimestamp(ctx, "clicks", 0, ts)
		if err != nil {
			t.Fatalf("timestamp %d: %v", ts, err)
		}
		offset, timestamp, err := tl.local.OffsetForTimestamp(ts)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (offset >= 0) || (ok && (got.Offset != offset || got.Timestamp != timestamp)) {
			t.Fatalf("timestamp %d: remote %+v (found %v); local offset %d at %d", ts, got, ok, offset, timestamp)
		}
		if ok {
			if want := tl.localEpoch(t, offset); got.LeaderEpoch != want {
				t.Fatalf("timestamp %d: epoch %d, want %d", ts, got.LeaderEpoch, want)
			}
			epochs[got.LeaderEpoch] = true
		}
	}
	if len(epochs) < 3 {
		t.Errorf("answers carried epochs %v; the test wants several", epochs)
	}
	for offset := int64(0); offset <= last.LastOffset; offset++ {
		got, err := r.EpochAt(ctx, "clicks", 0, offset)
		if want := tl.localEpoch(t, offset); err != nil || got != want {
			t.Fatalf("EpochAt(%d) = %d, %v; want %d", offset, got, err, want)
		}
	}
	if _, err := r.EpochAt(ctx, "clicks", 0, last.LastOffset+1); !errors.Is(err, ErrNotRemote) {
		t.Errorf("EpochAt past the remote segments: %v; want ErrNotRemote", err)
	}
}

// Records below the remote log start are not found, though their segment's
// objects still hold them: a search for a timestamp before every record
// answers the first offset at or after the start.
func TestOffsetForTimestampFromTheRemoteStart(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 30)
	second := tl.segments[1]
	tl.index.segments[log.TopicPartition{Topic: "clicks"}] = tl.segments[1:]
	r := NewRemoteReader(tl.index, newTestCache(t, tl.store, CacheConfig{}, nil))
	got, ok, err := r.OffsetForTimestamp(context.Background(), "clicks", 0, 0)
	if err != nil || !ok || got.Offset != second.BaseOffset {
		t.Fatalf("search from the start = %+v, %v, %v; want offset %d", got, ok, err, second.BaseOffset)
	}
}

// A search waits for the store no longer than its context allows.
func TestOffsetForTimestampEndsWithItsContext(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 30)
	release := tl.store.Hold()
	defer release()
	r := NewRemoteReader(tl.index, newTestCache(t, tl.store, CacheConfig{}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := r.OffsetForTimestamp(ctx, "clicks", 0, 1000); !errors.Is(err, context.Canceled) {
		t.Errorf("a search of a held store with an ended context: %v; want context.Canceled", err)
	}
}
