package lake

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/store"
)

// encodeRecord is one uncompressed v2 record with the given offset delta
// and value, its length prefix included.
func encodeRecord(offsetDelta int64, value string) []byte {
	body := []byte{0}                   // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// testBatch is an uncompressed v2 batch at base with the given attributes,
// claiming claimed records (lastOffsetDelta claimed-1) and holding records,
// with a valid CRC-32C.
func testBatch(base int64, attributes int16, claimed int32, records ...[]byte) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, Attributes: attributes, LastOffsetDelta: claimed - 1,
		FirstTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: claimed}
	for _, r := range records {
		b.Records = append(b.Records, r...)
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// clickValue is the value of click event eN.
func clickValue(n int64) string {
	return string(click(n, 0).Value)
}

// malformedRecord is a record whose length prefix is not a varint.
var malformedRecord = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// commitMarker is a transaction's commit marker batch at base.
func commitMarker(base int64) []byte {
	rec := []byte{0}
	rec = binary.AppendVarint(rec, 0)
	rec = binary.AppendVarint(rec, 0)
	rec = binary.AppendVarint(rec, 4)
	rec = append(rec, 0, 0, 0, 1) // version 0, type 1: commit
	rec = binary.AppendVarint(rec, 6)
	rec = append(rec, 0, 0, 0, 0, 0, 0)
	rec = binary.AppendVarint(rec, 0)
	b := testBatch(base, 0x30, 1, append(binary.AppendVarint(nil, int64(len(rec))), rec...))
	return b
}

func TestFindStuckBatch(t *testing.T) {
	d, err := boundedDecompressor(DefaultMaxDecompressedBatchBytes)
	if err != nil {
		t.Fatal(err)
	}
	tp := topicPartition{"clicks", 0}
	countLying := testBatch(2, 0, 3, encodeRecord(0, clickValue(2)))
	cases := []struct {
		name     string
		raw      []byte
		position int64
		want     stallVerdict
		at       int64  // the stuck position
		reason   string // in the validator's error
	}{
		{"valid batch: the client is slow", testBatch(2, 0, 2, encodeRecord(0, "a"), encodeRecord(1, "b")), 2, stallNone, 0, ""},
		{"valid batch from inside", testBatch(2, 0, 2, encodeRecord(0, "a"), encodeRecord(1, "b")), 3, stallNone, 0, ""},
		{"count-lying batch before its first record", countLying, 2, stallNone, 0, ""},
		{"count-lying batch after its record", countLying, 3, stallMalformed, 3, "record count 3 but the batch holds 1 records"},
		{"malformed record length", testBatch(2, 0, 3, malformedRecord), 2, stallMalformed, 2, "record 0 has a malformed length"},
		{"marker, then a malformed batch", append(commitMarker(2), testBatch(3, 0, 1, malformedRecord)...), 2, stallMalformed, 3, "malformed length"},
		{"count-lying batch, then a valid one: the client passes it", append(countLying[:len(countLying):len(countLying)],
			testBatch(5, 0, 1, encodeRecord(0, clickValue(5)))...), 3, stallNone, 0, ""},
		{"marker only: the client passed it", commitMarker(2), 2, stallNone, 0, ""},
		{"read cut short", testBatch(2, 0, 3, malformedRecord)[:70], 2, stallUnknown, 0, ""},
		{"nothing read", nil, 2, stallNone, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, stuck := findStuckBatch(c.raw, tp, c.position, d)
			if got != c.want {
				t.Fatalf("verdict %d, want %d", got, c.want)
			}
			if got != stallMalformed {
				return
			}
			if stuck.position != c.at || !strings.Contains(stuck.err.Error(), c.reason) {
				t.Errorf("stuck at %d (%v), want %d (%s)", stuck.position, stuck.err, c.at, c.reason)
			}
		})
	}
}

// fakeProbe serves a fixed log tail.
type fakeProbe struct {
	mu                  sync.Mutex
	end, start          int64
	raw                 []byte
	endCalls, readCalls int
	readAt              []int64
}

func (f *fakeProbe) endOffsets(context.Context, []string) (map[topicPartition]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endCalls++
	return map[topicPartition]int64{{"clicks", 0}: f.end}, nil
}

func (f *fakeProbe) startOffsets(context.Context, []string) (map[topicPartition]int64, error) {
	return map[topicPartition]int64{{"clicks", 0}: f.start}, nil
}

func (f *fakeProbe) read(_ context.Context, _ topicPartition, offset int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readCalls++
	f.readAt = append(f.readAt, offset)
	return f.raw, nil
}

// stallWorker is a test worker with a StallTimeout of a second whose stall
// checks ask probe, with its seeks and dead letters recorded.
func stallWorker(t *testing.T, probe stallProbe) (*Worker, *fakeBatches, *fakeDeadLetters) {
	t.Helper()
	w, _, dl := testWorker(t, t.TempDir(), func(c *Config) { c.StallTimeout = time.Second })
	fb := &fakeBatches{}
	withBatches(w, fb)
	d, err := boundedDecompressor(DefaultMaxDecompressedBatchBytes)
	if err != nil {
		t.Fatal(err)
	}
	w.probe, w.decompressor = probe, d
	return w, fb, dl
}

// The stall check runs once per StallTimeout of silence, reads nothing for
// a quiet partition, waits on a valid batch however long the client takes
// to deliver it (a slow fetch), and skips only a malformed one.
func TestStallCheck(t *testing.T) {
	probe := &fakeProbe{start: 2, end: 2}
	w, fb, dl := stallWorker(t, probe)
	now := base
	w.now = func() time.Time { return now }
	poll := func(recs ...*kgo.Record) {
		t.Helper()
		fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "clicks",
			Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs, HighWatermark: probe.end}}}}}}
		if err := w.handle(context.Background(), fetches); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	w.partitionLocked(topicPartition{"clicks", 0}) // assigned at base
	w.mu.Unlock()

	// Quiet, nothing delivered yet: checked from the group's start offset.
	poll()
	now = now.Add(time.Second)
	poll()
	poll() // within StallTimeout of the last check: not checked again
	if probe.endCalls != 1 || probe.readCalls != 0 {
		t.Fatalf("quiet: %d end listings, %d reads; want 1, 0", probe.endCalls, probe.readCalls)
	}

	// Records 2 and 3 are in the log; the client delivers them only after
	// many check intervals (a slow fetch).
	probe.end = 4
	probe.raw = testBatch(2, 0, 2, encodeRecord(0, clickValue(2)), encodeRecord(1, clickValue(3)))
	for range 5 {
		now = now.Add(time.Second)
		poll()
	}
	if probe.readCalls != 5 || len(fb.seeks) != 0 || len(dl.sent) != 0 {
		t.Fatalf("slow: %d reads, seeks %v, %d dead letters; want 5 reads and no skip", probe.readCalls, fb.seeks, len(dl.sent))
	}
	r2, r3 := click(2, 0), click(3, 0)
	poll(r2, r3)
	if p := w.parts[topicPartition{"clicks", 0}]; p.position != 4 {
		t.Fatalf("position %d after records 2 and 3, want 4", p.position)
	}

	// A count-lying batch at 4: its one record comes, then the client stops.
	probe.end = 7
	probe.raw = testBatch(4, 0, 3, encodeRecord(0, clickValue(4)))
	poll(click(4, 0))
	now = now.Add(999 * time.Millisecond)
	poll()
	if len(fb.seeks) != 0 {
		t.Fatalf("skipped before StallTimeout: %v", fb.seeks)
	}
	now = now.Add(time.Millisecond)
	poll()
	if strings.Join(fb.seeks, " ") != "clicks/0@7" || probe.readAt[len(probe.readAt)-1] != 5 {
		t.Fatalf("seeks %v, reads at %v; want one seek to 7 after a read at 5", fb.seeks, probe.readAt)
	}
	if len(dl.sent) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl.sent))
	}
	got := dl.sent[0]
	if got.Reason != reasonMalformedBatch || got.Offset != 5 || got.LastOffset != 6 || got.Records != 3 ||
		got.Compression != "none" || got.BatchBytes != len(probe.raw) || !strings.Contains(got.Error, "holds 1 records") {
		t.Errorf("dead letter %+v", got)
	}
}

// produceClicks produces click events eN for offsets, one batch each.
func produceClicks(ctx context.Context, t *testing.T, addr string, offsets ...int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, o := range offsets {
		r := click(o, 0)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// startSink starts a worker on the broker at addr with a short stall
// timeout and returns it with its store root and registry.
func startSink(ctx context.Context, t *testing.T, addr string) (*Worker, string, *prometheus.Registry) {
	t.Helper()
	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, err := New(Config{Brokers: []string{addr}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
		IdleTimeout: 100 * time.Millisecond, StallTimeout: 50 * time.Millisecond, SuccessGrace: -1}, st, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	return w, root, reg
}

// waitCommitted waits until the group has committed offset at.
func waitCommitted(ctx context.Context, t *testing.T, w *Worker, at int64) {
	t.Helper()
	adm := kadm.NewClient(w.client)
	for {
		offsets, err := adm.FetchOffsets(ctx, "g")
		if o, ok := offsets.Lookup("clicks", 0); err == nil && ok && o.At == at {
			return
		}
		select {
		case <-w.Done():
			t.Fatalf("the worker stopped: %v", w.Err())
		case <-ctx.Done():
			t.Fatalf("the group never committed offset %d: %v %v", at, offsets, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestMalformedBatchFromBroker: an uncompressed batch the client cannot get
// past sits in a partition between good records. The sink dead-letters it
// once, lands the records on both sides of it (and the one record a
// count-lying batch holds) and commits past the end.
func TestMalformedBatchFromBroker(t *testing.T) {
	cases := []struct {
		name   string
		batch  []byte
		landed string
		offset int64 // of the dead letter
		reason string
	}{
		{"claims 3 records, holds 1", testBatch(0, 0, 3, encodeRecord(0, clickValue(2))), "e0 e1 e2 e5 e6", 3,
			"record count 3 but the batch holds 1 records"},
		{"malformed record length", testBatch(0, 0, 3, malformedRecord), "e0 e1 e5 e6", 2,
			"record 0 has a malformed length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dataDir := t.TempDir()
			addr, stop := startBroker(t, dataDir)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			produceClicks(ctx, t, addr, 0, 1)
			stop()
			if at := appendBatchToLog(t, filepath.Join(dataDir, "logs", "clicks-0"), c.batch); at != 2 {
				t.Fatalf("the batch went to offset %d, want 2", at)
			}
			addr, _ = startBroker(t, dataDir)
			w, root, reg := startSink(ctx, t, addr)
			// The client stops at the batch only while it is the last one:
			// with records after it in the same fetch it passes it.
			for testCounterValue(t, reg, "millrace_lake_undecodable_batches_total") == 0 {
				select {
				case <-w.Done():
					t.Fatalf("the worker stopped: %v", w.Err())
				case <-ctx.Done():
					t.Fatal("the batch was never skipped")
				case <-time.After(20 * time.Millisecond):
				}
			}
			produceClicks(ctx, t, addr, 5, 6)
			waitCommitted(ctx, t, w, 7)
			var ids []string
			for _, file := range landed(t, root) {
				ids = append(ids, file...)
			}
			sort.Strings(ids)
			if strings.Join(ids, " ") != c.landed {
				t.Errorf("landed %v, want %s", ids, c.landed)
			}
			letters := deadLetters(ctx, t, addr)
			if len(letters) != 1 {
				t.Fatalf("%d dead letters, want 1", len(letters))
			}
			d := letters[0]
			if d.Reason != reasonMalformedBatch || d.Topic != "clicks" || d.Partition != 0 || d.Offset != c.offset ||
				d.LastOffset != 4 || d.BatchBytes != len(c.batch) || d.Compression != "none" || d.Records != 3 ||
				!strings.Contains(d.Error, c.reason) {
				t.Errorf("dead letter: %+v", d)
			}
			if got := testCounterValue(t, reg, "millrace_lake_undecodable_batches_total"); got != 1 {
				t.Errorf("millrace_lake_undecodable_batches_total = %v", got)
			}
		})
	}
}

// deadLetters reads clicks.dlq from the start.
func deadLetters(ctx context.Context, t *testing.T, addr string) []DeadLetter {
	t.Helper()
	dlq, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("clicks.dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	fetches := dlq.PollRecords(ctx, 10)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	var out []DeadLetter
	for _, r := range fetches.Records() {
		var d DeadLetter
		if err := json.Unmarshal(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// countingProbe counts the stall checks of a real worker.
type countingProbe struct {
	stallProbe
	mu     sync.Mutex
	checks int
	reads  int
}

func (c *countingProbe) endOffsets(ctx context.Context, topics []string) (map[topicPartition]int64, error) {
	c.mu.Lock()
	c.checks++
	c.mu.Unlock()
	return c.stallProbe.endOffsets(ctx, topics)
}

func (c *countingProbe) read(ctx context.Context, tp topicPartition, offset int64) ([]byte, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.stallProbe.read(ctx, tp, offset)
}

// TestQuietPartitionNotSkipped: a landed partition that gets no new
// records is checked again and again but never read or skipped.
func TestQuietPartitionNotSkipped(t *testing.T) {
	t.Parallel()
	addr, _ := startBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	produceClicks(ctx, t, addr, 0, 1)
	w, root, reg := startSink(ctx, t, addr)
	waitCommitted(ctx, t, w, 2)
	probe := &countingProbe{}
	w.landing.Lock() // the stall checks run holding it
	probe.stallProbe, w.probe = w.probe, probe
	w.landing.Unlock()
	for {
		probe.mu.Lock()
		checks, reads := probe.checks, probe.reads
		probe.mu.Unlock()
		if reads != 0 {
			t.Fatalf("a quiet partition's batch was read (%d checks)", checks)
		}
		if checks >= 5 {
			break
		}
		select {
		case <-w.Done():
			t.Fatalf("the worker stopped: %v", w.Err())
		case <-ctx.Done():
			t.Fatalf("only %d stall checks", checks)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got := testCounterValue(t, reg, "millrace_lake_undecodable_batches_total"); got != 0 {
		t.Errorf("millrace_lake_undecodable_batches_total = %v", got)
	}
	var ids []string
	for _, file := range landed(t, root) {
		ids = append(ids, file...)
	}
	sort.Strings(ids)
	if strings.Join(ids, " ") != "e0 e1" {
		t.Errorf("landed %v, want e0 e1", ids)
	}
}

// blockingProbe is a fakeProbe whose reads say they started and return
// once release is closed.
type blockingProbe struct {
	fakeProbe
	started, release chan struct{}
}

func (b *blockingProbe) read(ctx context.Context, tp topicPartition, offset int64) ([]byte, error) {
	close(b.started)
	<-b.release
	return b.fakeProbe.read(ctx, tp, offset)
}

// TestStallCheckHoldsNoLock: while a stall check reads from the broker,
// the worker's landing and state locks are free (a rebalance callback or
// Shutdown does not wait for the read). What the read found is acted on
// only if the partition is still assigned at the same position afterwards:
// a malformed batch is skipped, unless the partition was revoked during
// the read.
func TestStallCheckHoldsNoLock(t *testing.T) {
	for _, revoke := range []bool{false, true} {
		t.Run(fmt.Sprintf("revoked during the read %v", revoke), func(t *testing.T) {
			probe := &blockingProbe{fakeProbe: fakeProbe{start: 2, end: 5, raw: testBatch(2, 0, 3, malformedRecord)},
				started: make(chan struct{}), release: make(chan struct{})}
			w, fb, dl := stallWorker(t, probe)
			now := base
			w.now = func() time.Time { return now }
			w.mu.Lock()
			w.partitionLocked(topicPartition{"clicks", 0}) // assigned at base
			w.mu.Unlock()
			now = now.Add(time.Second)

			done := make(chan error, 1)
			go func() { done <- w.handle(context.Background(), nil) }()
			<-probe.started
			landingFree := w.landing.TryLock()
			if landingFree {
				w.landing.Unlock()
			}
			stateFree := w.mu.TryLock()
			if stateFree {
				w.mu.Unlock()
			}
			if landingFree && revoke {
				w.onRevoked(context.Background(), nil, map[string][]int32{"clicks": {0}})
			}
			close(probe.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !landingFree || !stateFree {
				t.Fatalf("during the stall check's read: landing lock free %v, state lock free %v; want both free", landingFree, stateFree)
			}
			want, letters := "clicks/0@5", 1
			if revoke {
				want, letters = "", 0
			}
			if got := strings.Join(fb.seeks, " "); got != want || len(dl.sent) != letters {
				t.Errorf("seeks %q and %d dead letters; want %q and %d", got, len(dl.sent), want, letters)
			}
		})
	}
}
