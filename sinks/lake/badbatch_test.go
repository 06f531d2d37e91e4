package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBatches describes every batch the same way and records the seeks.
type fakeBatches struct {
	desc  batchDescription
	err   error
	seeks []string
}

func (f *fakeBatches) describe(context.Context, topicPartition, int64) (batchDescription, error) {
	return f.desc, f.err
}

func (f *fakeBatches) seek(tp topicPartition, offset int64) {
	f.seeks = append(f.seeks, fmt.Sprintf("%s/%d@%d", tp.topic, tp.partition, offset))
}

// withBatches gives w a fake batch reader and seek.
func withBatches(w *Worker, f *fakeBatches) {
	w.batches, w.seek = f, f.seek
}

// logEntry is a record, or (rec == nil) an undecodable batch [first, next).
type logEntry struct {
	rec         *kgo.Record
	first, next int64
}

// badBatchError is what the client reports for the batch [first, next).
func badBatchError(first, next int64) error {
	return fmt.Errorf("unable to decompress batch: %w", &kgo.ErrDecompressTooLarge{Topic: "clicks", Partition: 0,
		Offset: first, Epoch: 3, NextOffset: next})
}

// feedLog delivers the entries from offset from through handle, one poll
// per entry, as the client would: records, or the error of an undecodable
// batch.
func feedLog(w *Worker, log []logEntry, from int64) error {
	w.mu.Lock()
	w.partitionLocked(topicPartition{"clicks", 0}) // assigned
	w.mu.Unlock()
	for _, e := range log {
		var f kgo.FetchPartition
		if e.rec != nil {
			if e.rec.Offset < from {
				continue
			}
			f = kgo.FetchPartition{Partition: 0, Records: []*kgo.Record{e.rec}}
		} else {
			if e.next <= from {
				continue
			}
			f = kgo.FetchPartition{Partition: 0, Err: badBatchError(e.first, e.next)}
		}
		fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "clicks", Partitions: []kgo.FetchPartition{f}}}}}
		if err := w.handle(context.Background(), fetches); err != nil {
			return err
		}
	}
	return nil
}

// clickLog is offsets 0..n-1, with the batch [first, next) undecodable.
func clickLog(n, first, next int64) []logEntry {
	var log []logEntry
	for i := int64(0); i < n; i++ {
		switch {
		case i == first:
			log = append(log, logEntry{first: first, next: next})
		case i > first && i < next:
		default:
			log = append(log, logEntry{rec: click(i, int(i/3)%2)})
		}
	}
	return log
}

// An undecodable batch is dead-lettered once, described, skipped (the
// client's position moves past its last offset), and committed with its
// window like a dead-lettered record; the records around it land in the
// files they would land in without it.
func TestUndecodableBatchSkipped(t *testing.T) {
	root := t.TempDir()
	w, c, d := testWorker(t, root, func(c *Config) { c.RollRows = 3 })
	f := &fakeBatches{desc: batchDescription{bytes: 80, compression: "zstd", records: 3, firstTimestamp: base,
		err: "zstd: invalid input: magic number mismatch"}}
	withBatches(w, f)
	if err := feedLog(w, clickLog(8, 2, 5), 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	// Windows: {0, 1, batch 2..4, 5} (three rows) and {6, 7}.
	if got := strings.Join(c.log, " "); got != "clicks/0@6 clicks/0@8" {
		t.Errorf("commits: %s", got)
	}
	if got := strings.Join(f.seeks, " "); got != "clicks/0@5" {
		t.Errorf("seeks: %s", got)
	}
	want := DeadLetter{Reason: reasonUndecodableBatch, Topic: "clicks", Partition: 0, Offset: 2, LastOffset: 4,
		Error: "zstd: invalid input: magic number mismatch", BatchBytes: 80, Compression: "zstd", Records: 3,
		Timestamp: "2024-05-01T10:00:00Z"}
	if len(d.sent) != 1 || fmt.Sprint(d.sent[0]) != fmt.Sprint(want) {
		t.Errorf("dead letters: %+v\nwant %+v", d.sent, want)
	}
	got := landed(t, root)
	wantFiles := map[string][]string{
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000001.parquet": {"e0", "e1"},
		"clicks/dt=2024-05-01/hr=11/part-0-00000000000000000005-00000000000000000005.parquet": {"e5"},
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000006-00000000000000000007.parquet": {"e6", "e7"},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantFiles) {
		t.Errorf("files:\n got %v\nwant %v", got, wantFiles)
	}
	if n := testutil.ToFloat64(w.metrics.undecodableBatches.WithLabelValues("clicks")); n != 1 {
		t.Errorf("undecodable batches counted: %v", n)
	}
}

// A batch that cannot be read again is still dead-lettered and skipped,
// with what the client reported.
func TestUndecodableBatchUndescribed(t *testing.T) {
	w, c, d := testWorker(t, t.TempDir(), nil)
	f := &fakeBatches{err: errors.New("broker gone")}
	withBatches(w, f)
	if err := feedLog(w, clickLog(3, 0, 2), 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.log, " "); got != "clicks/0@3" {
		t.Errorf("commits: %s", got)
	}
	if len(d.sent) != 1 || d.sent[0].Offset != 0 || d.sent[0].LastOffset != 1 || d.sent[0].BatchBytes != 0 ||
		!strings.Contains(d.sent[0].Error, "MaxDecompressBatchBytes") {
		t.Errorf("dead letters: %+v", d.sent)
	}
}

// A window that begins with a skipped batch measures roll-age from its
// first record, not from the zero time.
func TestUndecodableBatchStartsWindow(t *testing.T) {
	w, c, _ := testWorker(t, t.TempDir(), nil)
	withBatches(w, &fakeBatches{})
	if err := feedLog(w, clickLog(4, 0, 2), 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.log, " "); got != "clicks/0@4" {
		t.Errorf("commits: %s (a roll-age cut after the skip?)", got)
	}
}

// The skip keeps the naming argument of doc.go: a first owner's commit is
// lost after publishing, the next owner starts from the committed offset
// with other cut points and meets the same batch, and every record lands
// exactly once.
func TestUndecodableBatchRewrite(t *testing.T) {
	log := clickLog(40, 11, 16)
	for _, rollRows := range []int64{4, 7, 100} {
		t.Run(fmt.Sprint(rollRows), func(t *testing.T) {
			root := t.TempDir()
			w1, c1, _ := testWorker(t, root, func(c *Config) { c.RollRows = 6 })
			withBatches(w1, &fakeBatches{})
			w1.cfg.AfterPublish = func(string) {
				if len(c1.log) == 1 { // in the window that holds the batch
					c1.fail = errors.New("crash")
				}
			}
			if err := feedLog(w1, log, 0); err == nil {
				t.Fatal("the lost commit was not reported")
			}
			committed := c1.offsets[topicPartition{"clicks", 0}]
			if committed != 6 { // windows 0..5 and (lost) 6..16: rows 6..10, the batch 11..15, row 16
				t.Fatalf("committed %d, want 6", committed)
			}
			w2, c2, d2 := testWorker(t, root, func(c *Config) { c.RollRows = rollRows })
			withBatches(w2, &fakeBatches{})
			if err := feedLog(w2, log, committed); err != nil {
				t.Fatal(err)
			}
			if err := flushAll(w2); err != nil {
				t.Fatal(err)
			}
			if c2.offsets[topicPartition{"clicks", 0}] != 40 {
				t.Errorf("commits: %v", c2.log)
			}
			if len(d2.sent) != 1 || d2.sent[0].Offset != 11 || d2.sent[0].LastOffset != 15 {
				t.Errorf("dead letters: %+v", d2.sent)
			}
			seen := map[string]int{}
			for _, ids := range landed(t, root) {
				for _, id := range ids {
					seen[id]++
				}
			}
			if len(seen) != 35 {
				t.Errorf("%d distinct events landed, want 35", len(seen))
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s landed %d times", id, n)
				}
			}
		})
	}
}

// The decompressor is bounded, and every failure stops the partition the
// way the client's own bound does (wrapping kgo.ErrMaxDecompress) while
// keeping the codec's error.
func TestStoppingDecompressor(t *testing.T) {
	inner, err := boundedDecompressor(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	d := stoppingDecompressor{inner}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	small := enc.EncodeAll([]byte("records"), nil)
	bomb := enc.EncodeAll(make([]byte, 4<<20), nil) // a few hundred bytes that expand to 4 MiB
	if out, err := d.Decompress(small, kgo.CodecZstd); err != nil || string(out) != "records" {
		t.Errorf("valid zstd: %q, %v", out, err)
	}
	for _, c := range []struct {
		name  string
		src   []byte
		codec kgo.CompressionCodecType
		want  string
	}{
		{"bomb", bomb, kgo.CodecZstd, "exceed"},
		{"junk zstd", []byte("not zstd at all"), kgo.CodecZstd, "magic"},
		{"junk gzip", []byte("not gzip at all"), kgo.CodecGzip, "gzip"},
		{"junk lz4", []byte("not lz4 at all"), kgo.CodecLz4, "lz4"},
		{"junk snappy", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, kgo.CodecSnappy, "corrupt"},
		{"unknown codec", []byte("x"), 6, "unknown"},
	} {
		_, err := d.Decompress(c.src, c.codec)
		if !errors.Is(err, kgo.ErrMaxDecompress) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (want ErrMaxDecompress and %q)", c.name, err, c.want)
		}
	}
}

// describeBatch reads the header of the first batch and names the codec's
// error; a batch cut short by the read is described from its header.
func TestDescribeBatch(t *testing.T) {
	raw := junkBatch(7, 3, kgo.CodecZstd, []byte("junk, not zstd"))
	d, err := boundedDecompressor(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := describeBatch(append(raw, 0, 0, 0), 7, d) // a partial next batch follows
	if err != nil {
		t.Fatal(err)
	}
	if desc.bytes != len(raw) || desc.compression != "zstd" || desc.records != 3 || !strings.Contains(desc.err, "magic") {
		t.Errorf("description: %+v", desc)
	}
	desc, err = describeBatch(raw[:len(raw)-2], 7, d)
	if err != nil || desc.bytes != len(raw) || !strings.Contains(desc.err, "not decompressed") {
		t.Errorf("cut short: %+v, %v", desc, err)
	}
	for _, bad := range [][]byte{raw[:20], raw} {
		if _, err := describeBatch(bad, 8, d); err == nil {
			t.Errorf("%d bytes at the wrong offset described", len(bad))
		}
	}
}

// junkBatch is a v2 record batch at base claiming records records, with
// payload as its (compressed) records and a valid CRC-32C.
func junkBatch(base int64, records int32, codec kgo.CompressionCodecType, payload []byte) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, Attributes: int16(codec), LastOffsetDelta: records - 1,
		FirstTimestamp: base, MaxTimestamp: base, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: records, Records: payload}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
