package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/recordbatch"

	"millrace/internal/recordbatch/batchtest"
	"millrace/internal/waitfor"
)

// kv is one record of a compacted log as tests see it.
type kv struct {
	offset int64
	key    string
	value  string // "" with tombstone
	tomb   bool
}

func (r kv) String() string {
	if r.tomb {
		return fmt.Sprintf("%d:%s=<nil>", r.offset, r.key)
	}
	return fmt.Sprintf("%d:%s=%s", r.offset, r.key, r.value)
}

// keyedBatch encodes "key=value" records ("key" alone is a tombstone, an
// empty key is none) at
// timestamp ts, compressed with codec.
func keyedBatch(t testing.TB, ts int64, codec int, recs ...string) []byte {
	t.Helper()
	var body []byte
	for i, s := range recs {
		k, v, ok := strings.Cut(s, "=")
		rec := []byte{0} // attributes
		rec = binary.AppendVarint(rec, 0)
		rec = binary.AppendVarint(rec, int64(i))
		if k == "" {
			rec = binary.AppendVarint(rec, -1) // no key
		} else {
			rec = binary.AppendVarint(rec, int64(len(k)))
			rec = append(rec, k...)
		}
		if ok {
			rec = binary.AppendVarint(rec, int64(len(v)))
			rec = append(rec, v...)
		} else {
			rec = binary.AppendVarint(rec, -1)
		}
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
	}
	payload, err := recordbatch.EncodePayload(codec, body)
	if err != nil {
		t.Fatal(err)
	}
	b := batchtest.Build([]batchtest.Record{{Key: []byte("x"), Value: []byte("y")}}, ts, int16(codec))
	b = append(b[:batchHeaderSize], payload...)
	be := binary.BigEndian
	be.PutUint32(b[offLength:], uint32(len(b)-batchLengthOverhead))
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint32(b[offRecordCount:], uint32(len(recs)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// withProducer sets an idempotent producer's ID, epoch and base sequence.
func withProducer(b []byte, id int64, seq int32) []byte {
	be := binary.BigEndian
	be.PutUint64(b[offProducerID:], uint64(id))
	be.PutUint16(b[offProducerEpoch:], 0)
	be.PutUint32(b[offBaseSequence:], uint32(seq))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// logRecords decodes every record of the log.
func logRecords(t testing.TB, l *Log) []kv {
	t.Helper()
	var out []kv
	for _, sb := range readStored(t, l) {
		h := recordbatch.HeaderAt(sb.bytes)
		recs, err := openRecords(testDecoder, h, sb.bytes, 1<<30)
		if err != nil {
			t.Fatalf("batch %d: %v", sb.base, err)
		}
		for _, r := range recs {
			var rec kmsg.Record
			if err := rec.ReadFrom(r.raw); err != nil {
				t.Fatal(err)
			}
			out = append(out, kv{r.offset, string(rec.Key), string(rec.Value), rec.Value == nil})
		}
	}
	return out
}

func compactConfig() Config {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	cfg.SegmentBytes = 400
	cfg.IndexIntervalBytes = 100
	return cfg
}

// writeKeyed appends 10 batches (15 records): keys k0..k3 overwritten in
// turn, k1 deleted at offset 10, and a record without a key; then rolls, so all of it is
// cleanable. It returns what a cleaned log must hold while the tombstone
// is kept.
func writeKeyed(t *testing.T, l *Log, ts int64, codec int) []kv {
	t.Helper()
	batches := [][]string{
		{"k0=a", "k1=a"}, {"k2=a", "k3=a"}, {"k0=b"}, {"k1=b", "k2=b"}, {"k3=b", "k0=c"},
		{"k2=c"}, {"k1"}, {"=nokey"}, {"k3=c"}, {"k0=d", "k2=d"},
	}
	cfg := l.Config()
	for _, b := range batches {
		if b[0] == "=nokey" {
			// Written before the topic became compacted: a compacted
			// topic refuses records without key, but keeps those it has.
			deleting := cfg
			deleting.CleanupPolicy = PolicyDelete
			if err := l.SetConfig(deleting); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, keyedBatch(t, ts, codec, b...))
			if err := l.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mustAppend(t, l, keyedBatch(t, ts, codec, b...))
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	return []kv{{10, "k1", "", true}, {11, "", "nokey", false}, {12, "k3", "c", false}, {13, "k0", "d", false}, {14, "k2", "d", false}}
}

func TestCleanKeepsTheLastRecordOfEachKey(t *testing.T) {
	for codec, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
			dir := filepath.Join(t.TempDir(), "c-0")
			l := openTest(t, dir, compactConfig(), options{now: clock.now})
			defer func() { l.Close() }()
			ts := clock.now().UnixMilli()
			want := writeKeyed(t, l, ts, codec)
			end := l.EndOffset()
			res, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1})
			if err != nil || !res.Cleaned || res.RecordsRemoved != 10 {
				t.Fatalf("clean: %+v %v", res, err)
			}
			if got := logRecords(t, l); !slices.Equal(got, want) {
				t.Fatalf("after cleaning\n got %v\nwant %v", got, want)
			}
			if l.EndOffset() != end || l.StartOffset() != 0 {
				t.Fatalf("offsets moved: [%d, %d)", l.StartOffset(), l.EndOffset())
			}
			// Nothing more to do until delete.retention.ms passes.
			if res, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, Force: true}); err != nil || res.Cleaned {
				t.Fatalf("second pass over a clean log: %+v %v", res, err)
			}
			// A reopened log reads the same.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, dir, compactConfig(), options{now: clock.now})
			if got := logRecords(t, l); !slices.Equal(got, want) {
				t.Fatalf("after reopening\n got %v\nwant %v", got, want)
			}
			// A day later (delete.retention.ms) the tombstone goes too, on
			// the next pass, which new dirty segments start.
			clock.advance(24*time.Hour + time.Millisecond)
			mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), codec, "k9=z"))
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if res, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, Force: true}); err != nil || !res.Cleaned {
				t.Fatalf("third pass: %+v %v", res, err)
			}
			want = append(want[1:], kv{15, "k9", "z", false})
			if got := logRecords(t, l); !slices.Equal(got, want) {
				t.Fatalf("after delete.retention.ms\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestCleanWaitsForDirtyRatioAndLags(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.99
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), cfg, options{now: clock.now})
	defer l.Close()
	writeKeyed(t, l, clock.now().UnixMilli(), 0)
	ctx := context.Background()
	if res, err := l.Clean(ctx, CleanOptions{Now: clock.now(), Bound: -1}); err != nil || !res.Cleaned {
		t.Fatalf("a log never cleaned is all dirty (ratio 1): %+v %v", res, err)
	}
	// One more dirty segment: far below 0.99.
	mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), 0, "k0=e"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	st, err := l.CleanerStats(clock.now(), -1)
	if err != nil || st.DirtyBytes == 0 || st.DirtyRatio() >= 0.99 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	if res, err := l.Clean(ctx, CleanOptions{Now: clock.now(), Bound: -1}); err != nil || res.Cleaned {
		t.Fatalf("cleaned below min.cleanable.dirty.ratio: %+v %v", res, err)
	}
	// The high watermark below the dirty segment's end holds it back.
	if st, _ := l.CleanerStats(clock.now(), l.EndOffset()-1); st.DirtyBytes != 0 {
		t.Fatalf("bound ignored: %+v", st)
	}
	// max.compaction.lag.ms overrides the ratio once the record is old enough.
	cfg.MaxCompactionLag = time.Hour
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Clean(ctx, CleanOptions{Now: clock.now(), Bound: -1}); err != nil || res.Cleaned {
		t.Fatalf("cleaned before max.compaction.lag.ms: %+v %v", res, err)
	}
	clock.advance(time.Hour + time.Millisecond)
	// ... unless min.compaction.lag.ms keeps the segment out of reach.
	cfg.MinCompactionLag = 2 * time.Hour
	cfg.MaxCompactionLag = 2 * time.Hour
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.CleanerStats(clock.now(), -1); st.DirtyBytes != 0 {
		t.Fatalf("min.compaction.lag.ms ignored: %+v", st)
	}
	cfg.MinCompactionLag = 0
	cfg.MaxCompactionLag = time.Hour
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Clean(ctx, CleanOptions{Now: clock.now(), Bound: -1}); err != nil || !res.Cleaned {
		t.Fatalf("not cleaned after max.compaction.lag.ms: %+v %v", res, err)
	}
	got := logRecords(t, l)
	if n := len(got); got[n-1] != (kv{15, "k0", "e", false}) || slices.ContainsFunc(got, func(r kv) bool { return r.key == "k0" && r.offset != 15 }) {
		t.Fatalf("k0 not compacted: %v", got)
	}
}

// TestCleanKeepsEachProducersLastBatch: a producer whose records were all
// superseded keeps its last batch, empty, so its sequence survives a
// rebuild of the producer state from the log; its earlier batches go.
func TestCleanKeepsEachProducersLastBatch(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	dir := filepath.Join(t.TempDir(), "c-0")
	l := openTest(t, dir, compactConfig(), options{now: clock.now})
	ts := clock.now().UnixMilli()
	mustAppend(t, l, withProducer(keyedBatch(t, ts, 0, "a=1", "b=1"), 7, 0))
	mustAppend(t, l, withProducer(keyedBatch(t, ts, 0, "a=2", "b=2", "c=2"), 7, 2))
	mustAppend(t, l, keyedBatch(t, ts, 0, "a=3", "b=3", "c=3"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1}); err != nil {
		t.Fatal(err)
	}
	batches := readStored(t, l)
	if len(batches) != 2 {
		t.Fatalf("want the producer's emptied last batch and the last batch, got %d batches", len(batches))
	}
	h := recordbatch.HeaderAt(batches[0].bytes)
	if h.BaseOffset != 2 || h.LastOffset() != 4 || h.Records != 0 || h.ProducerID != 7 || h.BaseSequence != 2 {
		t.Fatalf("kept batch: %+v", h)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Rebuilt from the log alone, the producer's state is unchanged.
	if err := os.Remove(filepath.Join(dir, producerSnapshotFile)); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, compactConfig(), options{now: clock.now})
	defer l.Close()
	ps, err := l.Producers()
	if err != nil || len(ps) != 1 || ps[0].ID != 7 || ps[0].LastSequence != 4 {
		t.Fatalf("producers after rebuild: %+v %v", ps, err)
	}
	// A retry of that batch is still a duplicate.
	v, err := l.ValidateProduce(withProducer(keyedBatch(t, ts, 0, "a=2", "b=2", "c=2"), 7, 2), clock.now())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := l.AppendValidated(v, 1); err != nil || !info.Duplicate || info.FirstOffset != 2 {
		t.Fatalf("retry after cleaning: %+v %v", info, err)
	}
}

// TestCleanCrashAtEveryStep kills a pass after each durable step of its
// swap: the log reopens with either the old segments or the cleaned ones,
// and the next pass finishes the work.
func TestCleanCrashAtEveryStep(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	pristine := filepath.Join(t.TempDir(), "c-0")
	l := openTest(t, pristine, compactConfig(), options{now: clock.now})
	want := writeKeyed(t, l, clock.now().UnixMilli(), codecZstd)
	old := logRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(pristine, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	committed := false
	for n := 0; ; n++ {
		work := filepath.Join(t.TempDir(), "c-0")
		copyDir(t, pristine, work)
		l := openTest(t, work, compactConfig(), options{now: clock.now})
		calls, step := 0, ""
		l.replace.stopAfter = func(s string) bool {
			calls++
			step = s
			return calls > n
		}
		_, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1})
		if err == nil {
			l.Close()
			if n < 5 {
				t.Fatalf("the swap finished after %d steps", n)
			}
			return
		}
		if !errors.Is(err, errStopped) {
			t.Fatalf("clean stopped after %d steps: %v", n, err)
		}
		crashed := filepath.Join(t.TempDir(), "c-0")
		copyDir(t, work, crashed)
		l.Close()
		committed = committed || step == "committed"
		r := openTest(t, crashed, compactConfig(), options{now: clock.now})
		got := logRecords(t, r)
		if committed && !slices.Equal(got, want) || !committed && !slices.Equal(got, old) {
			t.Fatalf("reopened after %q (committed %v): %v", step, committed, got)
		}
		checkNoReplacementFiles(t, crashed)
		if _, err := r.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, Force: true}); err != nil {
			t.Fatalf("pass after the crash at %q: %v", step, err)
		}
		if got := logRecords(t, r); !slices.Equal(got, want) {
			t.Fatalf("pass after the crash at %q left %v", step, got)
		}
		r.Close()
	}
}

// TestCleanOffsetMapBound: a map too small for the dirty keys cleans up to
// the end of the segment that filled it; later passes do the rest.
func TestCleanOffsetMapBound(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), compactConfig(), options{now: clock.now})
	defer l.Close()
	want := writeKeyed(t, l, clock.now().UnixMilli(), 0)
	passes := 0
	for {
		res, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, MapBytes: 1, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Cleaned {
			break
		}
		passes++
	}
	if got := logRecords(t, l); passes < 2 || !slices.Equal(got, want) {
		t.Fatalf("%d passes left %v", passes, got)
	}
}

// TestAppendReplicatedAcrossCleanedRange: a follower appends a leader's
// batch that starts past its log end, where the leader cleaned records
// away; a batch starting before the end is still refused.
func TestAppendReplicatedAcrossCleanedRange(t *testing.T) {
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), compactConfig(), options{})
	defer l.Close()
	mustAppend(t, l, keyedBatch(t, 1, 0, "a=1", "b=1"))
	b := keyedBatch(t, 1, 0, "c=1")
	binary.BigEndian.PutUint64(b[offBaseOffset:], 7)
	if _, err := l.AppendReplicated(b); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 8 {
		t.Fatalf("end %d", l.EndOffset())
	}
	binary.BigEndian.PutUint64(b[offBaseOffset:], 5)
	if _, err := l.AppendReplicated(b); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("batch before the end: %v", err)
	}
	got := logRecords(t, l)
	if len(got) != 3 || got[2].offset != 7 {
		t.Fatalf("records %v", got)
	}
}

func TestRetentionFollowsCleanupPolicy(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	cfg := compactConfig()
	cfg.Retention = time.Hour
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), cfg, options{now: clock.now})
	defer l.Close()
	writeKeyed(t, l, clock.now().UnixMilli(), 0)
	clock.advance(2 * time.Hour)
	if n, err := l.EnforceRetention(clock.now()); err != nil || n != 0 {
		t.Fatalf("compact-only log lost %d segments to retention.ms: %v", n, err)
	}
	cfg.CleanupPolicy = "compact,delete"
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := l.EnforceRetention(clock.now()); err != nil || n == 0 {
		t.Fatalf("compact,delete log kept old segments: %d %v", n, err)
	}
}

func TestThrottlePaces(t *testing.T) {
	th := NewThrottle(1 << 20)
	start := time.Now()
	for range 6 {
		if err := th.Wait(context.Background(), 64<<10); err != nil {
			t.Fatal(err)
		}
	}
	// 384 KiB at 1 MiB/s, less the 0.1 s of burst allowed.
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("384 KiB passed in %v at 1 MiB/s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := th.Wait(ctx, 1<<30); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait after cancel: %v", err)
	}
	if NewThrottle(DefaultCleanerConfig().IOMaxBytesPerSecond) != nil {
		t.Fatal("the default rate is throttled")
	}
}

// TestManagerCleanerMetrics runs the manager's cleaner thread on a
// compacted log and a delete-policy one: only the first is cleaned, and
// the metrics count the pass.
func TestManagerCleanerMetrics(t *testing.T) {
	m, err := openManager(t.TempDir(), DefaultConfig(), testLogger(t), options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	compacted, err := m.Create("c", 0, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	plain := compactConfig()
	plain.CleanupPolicy = PolicyDelete
	deleting, err := m.Create("d", 0, plain)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	writeKeyed(t, compacted, now, codecGzip)
	writeKeyed(t, deleting, now, codecGzip)
	before := logRecords(t, deleting)

	reg := prometheus.NewRegistry()
	cfg := DefaultCleanerConfig()
	cfg.Backoff = 10 * time.Millisecond
	if err := m.StartCleaner(cfg, func(tp TopicPartition) (int64, bool) { return -1, true }, reg); err != nil {
		t.Fatal(err)
	}
	metric := func(name string) float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				m := f.GetMetric()[0]
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	waitfor.Until(t, 10*time.Second, "a cleaner pass", func() bool { return metric("millrace_log_cleaner_runs_total") >= 1 })
	if got := metric("millrace_log_cleaner_records_removed_total"); got != 10 {
		t.Fatalf("records removed %v, want 10", got)
	}
	if got := metric("millrace_log_cleaner_bytes_reclaimed_total"); got <= 0 {
		t.Fatalf("bytes reclaimed %v", got)
	}
	// Its next look finds nothing dirty.
	waitfor.Until(t, 10*time.Second, "a dirty ratio of 0 after cleaning", func() bool { return metric("millrace_log_cleaner_max_dirty_ratio") == 0 })
	if got := logRecords(t, deleting); !slices.Equal(got, before) {
		t.Fatalf("a delete-policy log was cleaned: %v", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCompactedTopicRefusesKeylessRecords: as Kafka, a compacted topic
// refuses a produced record without key (INVALID_RECORD); the check also
// covers records longer than the decompression window.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	now := time.UnixMilli(1_000_000_000)
	large := strings.Repeat("x", 2*batchtest.WalkWindow)
	for _, tc := range []struct {
		name  string
		codec int
		recs  []string
	}{
		{"small", codecNone, []string{"k=v", "=v"}},
		{"large", codecGzip, []string{"k=v", "=" + large}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := keyedBatch(t, now.UnixMilli(), tc.codec, tc.recs...)
			if _, err := validateProduce(testDecoder, b, compactConfig(), now); !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "no key") {
				t.Fatalf("compacted topic: %v", err)
			}
			deleting := compactConfig()
			deleting.CleanupPolicy = PolicyDelete
			if _, err := validateProduce(testDecoder, b, deleting, now); err != nil {
				t.Fatalf("delete-policy topic: %v", err)
			}
			keyed := keyedBatch(t, now.UnixMilli(), tc.codec, tc.recs[0], "k2"+tc.recs[1])
			if _, err := validateProduce(testDecoder, keyed, compactConfig(), now); err != nil {
				t.Fatalf("keyed records: %v", err)
			}
		})
	}
}

// txnKeyed is keyedBatch written by a transactional producer.
func txnKeyed(t testing.TB, ts int64, producer int64, seq int32, recs ...string) []byte {
	b := withProducer(keyedBatch(t, ts, codecNone, recs...), producer, seq)
	be := binary.BigEndian
	be.PutUint16(b[offAttributes:], be.Uint16(b[offAttributes:])|attrTransactional)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// describeBatches renders each batch: its offsets, its producer, and its
// records or the marker it is.
func describeBatches(t testing.TB, l *Log) []string {
	t.Helper()
	var out []string
	for _, sb := range readStored(t, l) {
		h := recordbatch.HeaderAt(sb.bytes)
		d := fmt.Sprintf("%d-%d p%d", h.BaseOffset, h.LastOffset(), h.ProducerID)
		if h.Control() {
			typ, _, _ := parseControlRecord(sb.bytes)
			d += [...]string{" abort", " commit"}[typ]
			out = append(out, d)
			continue
		}
		recs, err := openRecords(testDecoder, h, sb.bytes, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			var rec kmsg.Record
			if err := rec.ReadFrom(r.raw); err != nil {
				t.Fatal(err)
			}
			d += fmt.Sprintf(" %s=%s", rec.Key, rec.Value)
		}
		out = append(out, d)
	}
	return out
}

// TestCleanTransactions: aborted transactions leave (their producer's last
// batch stays, emptied), committed ones are compacted like other records,
// an aborted record hides nothing, and a marker goes delete.retention.ms
// after its transaction kept no records.
func TestCleanTransactions(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), compactConfig(), options{now: clock.now})
	defer l.Close()
	ts := clock.now().UnixMilli()
	marker := func(producer int64, commit bool) {
		t.Helper()
		if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: producer, Commit: commit, CoordinatorEpoch: 1, Timestamp: ts}, 0); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, l, txnKeyed(t, ts, 10, 0, "a=t1", "b=t1")) // 0-1
	marker(10, true)                                         // 2
	mustAppend(t, l, txnKeyed(t, ts, 20, 0, "a=x", "c=x"))   // 3-4
	marker(20, false)                                        // 5
	mustAppend(t, l, keyedBatch(t, ts, codecNone, "b=2"))    // 6
	mustAppend(t, l, txnKeyed(t, ts, 10, 2, "d=t2"))         // 7
	marker(10, true)                                         // 8
	mustAppend(t, l, txnKeyed(t, ts, 30, 0, "e=x"))          // 9
	marker(30, false)                                        // 10
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"0-1 p10 a=t1", "2-2 p10 commit", "3-4 p20", "5-5 p20 abort", "6-6 p-1 b=2", "7-7 p10 d=t2", "8-8 p10 commit", "9-9 p30", "10-10 p30 abort"}
	if got := describeBatches(t, l); !slices.Equal(got, want) {
		t.Fatalf("first pass\n got %q\nwant %q", got, want)
	}
	clock.advance(24*time.Hour + time.Millisecond)
	mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), codecNone, "f=1"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, Force: true}); err != nil {
		t.Fatal(err)
	}
	want = []string{"0-1 p10 a=t1", "2-2 p10 commit", "3-4 p20", "6-6 p-1 b=2", "7-7 p10 d=t2", "8-8 p10 commit", "9-9 p30", "11-11 p-1 f=1"}
	if got := describeBatches(t, l); !slices.Equal(got, want) {
		t.Fatalf("after delete.retention.ms\n got %q\nwant %q", got, want)
	}
}

// TestCleanStopsAtAnOngoingTransaction: nothing from an ongoing
// transaction's first offset on is cleaned.
func TestCleanStopsAtAnOngoingTransaction(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), compactConfig(), options{now: clock.now})
	defer l.Close()
	ts := clock.now().UnixMilli()
	mustAppend(t, l, keyedBatch(t, ts, codecNone, "a=1", "a=2"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, txnKeyed(t, ts, 10, 0, "a=3")) // 2, never ended
	mustAppend(t, l, keyedBatch(t, ts, codecNone, "b=1", "b=2"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	st, err := l.CleanerStats(clock.now(), -1)
	if err != nil || st.CleanableEnd != 2 {
		t.Fatalf("stats with a transaction open at 2: %+v %v", st, err)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1, Force: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{"0-1 p-1 a=2", "2-2 p10 a=3", "3-4 p-1 b=1 b=2"}
	if got := describeBatches(t, l); !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestCleanAfterDeleteRecords: a log start offset moved inside the first
// segment (DeleteRecords) is no obstacle; the batches wholly below it go.
func TestCleanAfterDeleteRecords(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), compactConfig(), options{now: clock.now})
	defer l.Close()
	ts := clock.now().UnixMilli()
	mustAppend(t, l, keyedBatch(t, ts, codecNone, "a=1"))
	mustAppend(t, l, keyedBatch(t, ts, codecNone, "b=1", "c=1"))
	mustAppend(t, l, keyedBatch(t, ts, codecNone, "c=2"))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.AdvanceStartOffset(2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: clock.now(), Bound: -1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"1-2 p-1 b=1", "3-3 p-1 c=2"}
	if got := describeBatches(t, l); !slices.Equal(got, want) || l.StartOffset() != 2 {
		t.Fatalf("got %q from %d\nwant %q from 2", got, l.StartOffset(), want)
	}
}

// TestMaxCompactionLagRollsTheActiveSegment: on a compacted log the active
// segment rolls once max.compaction.lag.ms old, so its records become
// cleanable within the lag.
func TestMaxCompactionLagRollsTheActiveSegment(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000_000)}
	cfg := compactConfig()
	cfg.MaxCompactionLag = time.Hour
	l := openTest(t, filepath.Join(t.TempDir(), "c-0"), cfg, options{now: clock.now})
	defer l.Close()
	mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), codecNone, "a=1"))
	clock.advance(59 * time.Minute)
	mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), codecNone, "a=2"))
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("rolled before max.compaction.lag.ms: %d segments", n)
	}
	clock.advance(time.Minute)
	mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), codecNone, "a=3"))
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("not rolled after max.compaction.lag.ms: %d segments", n)
	}
	cfg.CleanupPolicy = PolicyDelete
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Hour)
	mustAppend(t, l, keyedBatch(t, clock.now().UnixMilli(), codecNone, "a=4"))
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("a delete-policy log rolled by max.compaction.lag.ms: %d segments", n)
	}
}
