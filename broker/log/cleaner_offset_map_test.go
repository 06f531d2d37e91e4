package log

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/internal/recordbatch"

	"millrace/internal/recordbatch/batchtest"
	"millrace/internal/waitfor"
)

// TestOffsetMapBound: the map's memory is its slots, 24 bytes each, within
// the bound whatever the keys' sizes; a new key past the bound is refused
// while known keys still update.
func TestOffsetMapBound(t *testing.T) {
	for _, keyBytes := range []int{1, 100, 64 << 10} {
		t.Run(fmt.Sprintf("key %d bytes", keyBytes), func(t *testing.T) {
			const maxBytes = 24 * 100
			m := newOffsetMap(maxBytes, 1<<40)
			if m.Bytes() > maxBytes {
				t.Fatalf("map of %d bytes, bound %d", m.Bytes(), maxBytes)
			}
			key := func(i int) []byte {
				return []byte(fmt.Sprintf("%06d%s", i, strings.Repeat("k", keyBytes)))
			}
			n := 0
			for ; m.put(key(n), int64(n)); n++ {
				if n > 100 {
					t.Fatal("more keys than slots")
				}
			}
			if n != 75 {
				t.Fatalf("%d keys fit, want 75 (100 slots at load factor 0.75)", n)
			}
			if !m.put(key(3), 1000) {
				t.Fatal("a known key was refused when the map was full")
			}
			for i := range n {
				want := int64(i)
				if i == 3 {
					want = 1000
				}
				if got, ok := m.get(key(i)); !ok || got != want {
					t.Fatalf("key %d: %d %v, want %d", i, got, ok, want)
				}
			}
			if _, ok := m.get(key(n)); ok {
				t.Fatal("a refused key is in the map")
			}
		})
	}
}

// TestOffsetMapSizedByRange: a dirty range of a few offsets never takes the
// whole buffer.
func TestOffsetMapSizedByRange(t *testing.T) {
	m := newOffsetMap(128<<20, 10)
	if m.maxEntries != 10 || m.Bytes() > 24*20 {
		t.Fatalf("map for 10 offsets holds %d entries in %d bytes", m.maxEntries, m.Bytes())
	}
	// A range as wide as offsets go is bounded by the buffer alone.
	if m := newOffsetMap(1<<20, math.MaxInt64); m.Bytes() > 1<<20 || m.maxEntries != 32767 {
		t.Fatalf("map for every offset holds %d entries in %d bytes", m.maxEntries, m.Bytes())
	}
}

// TestCleanSegmentLargerThanMap: one segment whose keys alone exceed the
// map (21 entries here) is cleaned over several passes, the map stopping
// inside the segment and inside a batch, each pass going on from where
// the last one stopped, until the log holds the last record of each key.
func TestCleanSegmentLargerThanMap(t *testing.T) {
	for _, codec := range []int{codecNone, codecZstd} {
		t.Run(recordbatch.CodecName(codec), func(t *testing.T) {
			clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
			cfg := compactConfig()
			cfg.SegmentBytes = 1 << 20
			l := openTest(t, filepath.Join(t.TempDir(), "c-0"), cfg, options{now: clock.now})
			defer l.Close()
			ts := clock.now().UnixMilli()
			var first, second, both []string
			var want []kv
			for i := range 60 {
				k := fmt.Sprintf("k%02d", i)
				if i < 30 {
					first = append(first, k+"=a")
				} else {
					second = append(second, k+"=a")
				}
				both = append(both, k+"=b")
				want = append(want, kv{int64(60 + i), k, "b", false})
			}
			for _, b := range [][]string{first, second, both} {
				mustAppend(t, l, keyedBatch(t, ts, codec, b...))
			}
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if n := len(l.Segments()); n != 2 {
				t.Fatalf("%d segments, want one closed and the active one", n)
			}
			const mapBytes = 24 * 28 // 28 slots: 21 keys
			var mapped []int64
			for {
				res, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, MapBytes: mapBytes, Force: true})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Cleaned {
					break
				}
				if res.To != 120 || res.MapFull != (res.MappedTo < 120) {
					t.Fatalf("pass %d: %+v", len(mapped), res)
				}
				mapped = append(mapped, res.MappedTo)
				if len(mapped) > 10 {
					t.Fatalf("no end to the passes: mapped ends %v", mapped)
				}
			}
			// 21 keys a pass: 0-20, 21-41, 42-62 (stops inside the third
			// batch), 63-83, 84-104, 105-119.
			if wantMapped := []int64{21, 42, 63, 84, 105, 120}; !slices.Equal(mapped, wantMapped) {
				t.Fatalf("passes ended at %v, want %v", mapped, wantMapped)
			}
			if got := logRecords(t, l); !slices.Equal(got, want) {
				t.Fatalf("after %d passes\n got %v\nwant %v", len(mapped), got, want)
			}
		})
	}
}

// TestCompactedTopicBoundsKeys: a compacted topic refuses a produced key
// longer than millrace.compacted.max.key.bytes (INVALID_RECORD), also in a
// record longer than the decompression window; a delete-policy topic
// takes it.
func TestCompactedTopicBoundsKeys(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	cfg := compactConfig()
	cfg.CompactedMaxKeyBytes = 4 << 10
	fits, over := strings.Repeat("k", 4<<10), strings.Repeat("k", 4<<10+1)
	large := strings.Repeat("v", 2*batchtest.WalkWindow)
	for _, tc := range []struct {
		name  string
		codec int
		value string
	}{
		{"small", codecNone, "v"},
		{"large", codecZstd, large},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := keyedBatch(t, now.UnixMilli(), tc.codec, "a="+tc.value, over+"="+tc.value)
			_, err := validateProduce(testDecoder, b, cfg, now)
			if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "record 1: a key of 4097 bytes") {
				t.Fatalf("compacted topic, key over the bound: %v", err)
			}
			deleting := cfg
			deleting.CleanupPolicy = PolicyDelete
			if _, err := validateProduce(testDecoder, b, deleting, now); err != nil {
				t.Fatalf("delete-policy topic: %v", err)
			}
			ok := keyedBatch(t, now.UnixMilli(), tc.codec, "a="+tc.value, fits+"="+tc.value)
			if _, err := validateProduce(testDecoder, ok, cfg, now); err != nil {
				t.Fatalf("key at the bound: %v", err)
			}
		})
	}
	if DefaultConfig().CompactedMaxKeyBytes != 64<<10 {
		t.Fatalf("default %d", DefaultConfig().CompactedMaxKeyBytes)
	}
}

// TestManagerCleanerMapFull: the cleaner threads clean a segment whose
// keys exceed log.cleaner.dedupe.buffer.size (1 MiB: 32,767 keys) over
// two passes, counting the one whose map filled.
func TestManagerCleanerMapFull(t *testing.T) {
	m, err := openManager(t.TempDir(), DefaultConfig(), testLogger(t), options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := compactConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := m.Create("c", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	const keys = 40000
	for b := range keys / 1000 {
		recs := make([]string, 1000)
		for i := range recs {
			recs[i] = fmt.Sprintf("k%05d=v", b*1000+i)
		}
		mustAppend(t, l, keyedBatch(t, now, codecZstd, recs...))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cc := DefaultCleanerConfig()
	cc.Backoff = 10 * time.Millisecond
	cc.DedupeBufferSize = 1 << 20
	if err := m.StartCleaner(cc, func(TopicPartition) (int64, bool) { return -1, true }, reg); err != nil {
		t.Fatal(err)
	}
	counter := func(name string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	waitfor.Until(t, 20*time.Second, "two cleaner passes", func() bool { return counter("millrace_log_cleaner_runs_total") >= 2 })
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if runs, full := counter("millrace_log_cleaner_runs_total"), counter("millrace_log_cleaner_map_full_total"); runs != 2 || full != 1 {
		t.Fatalf("%v passes, %v with a full map; want 2 and 1", runs, full)
	}
	if first, err := l.firstDirtyOffset(); err != nil || first != keys {
		t.Fatalf("first dirty offset %d (%v), want %d", first, err, keys)
	}
}
