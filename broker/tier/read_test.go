package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"

	"millrace/broker/log"
	"millrace/internal/recordbatch/batchtest"
	"millrace/store/storetest"
)

// fakeIndex is a RemoteIndex over a fixed list of segments per partition.
type fakeIndex struct {
	mu       sync.Mutex // guards segments
	segments map[log.TopicPartition][]Segment
}

func (f *fakeIndex) RemoteBounds(topic string, partition int32) (int64, int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.segments[log.TopicPartition{Topic: topic, Partition: partition}]
	if len(s) == 0 {
		return 0, 0, false
	}
	return s[0].BaseOffset, s[len(s)-1].LastOffset, true
}

func (f *fakeIndex) SegmentFor(topic string, partition int32, offset int64) (Segment, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.segments[log.TopicPartition{Topic: topic, Partition: partition}]
	i := sort.Search(len(s), func(i int) bool { return s[i].LastOffset >= offset })
	if i == len(s) {
		return Segment{}, false
	}
	return s[i], true
}

// tieredLog is a log written by broker/log whose closed segments were
// copied into a store, file by file, as the write side uploads them.
type tieredLog struct {
	local    *log.Log
	store    *storetest.Gated
	index    *fakeIndex
	segments []Segment
}

// newTieredLog writes batches of 1 to 5 records, 10 ms apart and a leader
// epoch every 8 batches, into a log with small
// segments and a dense offset index, rolls it, and copies every closed
// segment into a store under "<topic>-<partition>/<base offset>".
func newTieredLog(t *testing.T, topic string, partition int32, batches int) *tieredLog {
	t.Helper()
	return newTieredLogSized(t, topic, partition, batches, 40, 1500, 200)
}

// newTieredLogSized is newTieredLog with values of valueSize bytes, and
// segment.bytes and index.interval.bytes given.
func newTieredLogSized(t testing.TB, topic string, partition int32, batches, valueSize int, segmentBytes int64, indexInterval int) *tieredLog {
	t.Helper()
	dir := t.TempDir()
	cfg := log.DefaultConfig()
	cfg.SegmentBytes = segmentBytes
	cfg.IndexIntervalBytes = indexInterval
	l, err := log.Open(dir, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range batches {
		if _, err := l.Append(batchtest.Make(1+i%5, valueSize, 1000+int64(i)*10, byte(i)), int32(i/8)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	tl := &tieredLog{local: l, store: storetest.NewGated(t), index: &fakeIndex{segments: map[log.TopicPartition][]Segment{}}}
	for _, s := range l.Segments() {
		if s.Size == 0 {
			continue // the new active segment
		}
		seg := Segment{BaseOffset: s.BaseOffset, LastOffset: s.NextOffset - 1, Size: s.Size, MaxTimestamp: s.MaxTimestamp, Key: fmt.Sprintf("%s-%d/%020d", topic, partition, s.BaseOffset)}
		for _, suffix := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%020d%s", s.BaseOffset, suffix)))
			if err != nil {
				t.Fatal(err)
			}
			storetest.Put(t, tl.store, seg.Key+suffix, b)
		}
		tl.segments = append(tl.segments, seg)
	}
	if len(tl.segments) < 3 {
		t.Fatalf("the log has %d closed segments; the test wants several", len(tl.segments))
	}
	tl.index.segments[log.TopicPartition{Topic: topic, Partition: partition}] = tl.segments
	return tl
}

// localRead is broker/log's answer, which a remote read must equal.
func (tl *tieredLog) localRead(t testing.TB, offset int64, maxBytes int, maxOffset int64) Batches {
	t.Helper()
	s, err := tl.local.Read(offset, maxBytes, maxOffset)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return Batches{Records: b, FirstOffset: s.FirstOffset(), NextOffset: s.NextOffset()}
}

// A remote read returns what broker/log's Log.Read returns for the same
// segment, byte for byte: from every offset (batch bases and offsets
// inside batches), at the byte limits around batch sizes, and bounded by a
// max offset. The rules are Kafka's fetch rules (KIP-74: whole batches,
// the first even if larger than the limit; only batches below the high
// watermark), as broker/log/read.go implements them.
func TestReadSegmentMatchesLocalRead(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 60)
	c := newTestCache(t, tl.store, CacheConfig{}, nil)
	r := NewRemoteReader(tl.index, c)
	end := tl.segments[len(tl.segments)-1].LastOffset + 1
	ctx := context.Background()
	reads := 0
	for offset := int64(0); offset < end; offset++ {
		for _, maxBytes := range []int{0, 1, 150, 151, 400, 1 << 20} {
			for _, maxOffset := range []int64{end, offset + 1, offset + 7, end / 2} {
				got, err := r.Read(ctx, ReadRequest{Topic: "clicks", Offset: offset, MaxBytes: maxBytes, MaxOffset: maxOffset})
				if err != nil {
					t.Fatalf("offset %d, max bytes %d, max offset %d: %v", offset, maxBytes, maxOffset, err)
				}
				want := tl.localRead(t, offset, maxBytes, maxOffset)
				if !bytes.Equal(got.Records, want.Records) || got.FirstOffset != want.FirstOffset || got.NextOffset != want.NextOffset {
					t.Fatalf("offset %d, max bytes %d, max offset %d: read %d bytes [%d, %d); local %d bytes [%d, %d)",
						offset, maxBytes, maxOffset, len(got.Records), got.FirstOffset, got.NextOffset, len(want.Records), want.FirstOffset, want.NextOffset)
				}
				reads++
			}
		}
	}
	// Every chunk (of testChunk bytes, so reads and headers cross chunk
	// boundaries) was fetched once: the rest came from the cache.
	if s := c.Stats(); s.Fetches != int64(s.Chunks) || s.Hits == 0 {
		t.Errorf("%d reads: %+v; want each chunk fetched once", reads, s)
	}
}

// A read ends at its segment's end, and the next read goes on in the next
// segment: reading from 0 by NextOffset walks every batch once, in order.
func TestReadWalksAcrossSegments(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 40)
	r := NewRemoteReader(tl.index, newTestCache(t, tl.store, CacheConfig{}, nil))
	end := tl.segments[len(tl.segments)-1].LastOffset + 1
	var got []byte
	for offset := int64(0); offset < end; {
		b, err := r.Read(context.Background(), ReadRequest{Topic: "clicks", Offset: offset, MaxBytes: 1 << 20, MaxOffset: end})
		if err != nil {
			t.Fatal(err)
		}
		if b.NextOffset <= offset {
			t.Fatalf("a read at %d made no progress", offset)
		}
		got = append(got, b.Records...)
		offset = b.NextOffset
	}
	want := tl.localRead(t, 0, 1<<30, end).Records
	for _, s := range tl.segments[1:] {
		want = append(want, tl.localRead(t, s.BaseOffset, 1<<30, end).Records...)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("walked %d bytes; the log has %d", len(got), len(want))
	}
	if _, err := r.Read(context.Background(), ReadRequest{Topic: "clicks", Offset: end, MaxBytes: 100, MaxOffset: end}); !errors.Is(err, ErrNotRemote) {
		t.Errorf("a read past the remote segments: %v; want ErrNotRemote", err)
	}
}

// A damaged object is an error, never a panic or an allocation of what a
// header claims: a .log shorter than the state says, and an index that is
// not whole entries.
func TestReadSegmentRefusesDamage(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 30)
	c := newTestCache(t, tl.store, CacheConfig{}, nil)
	seg := tl.segments[0]
	long := seg
	long.Size += 1000
	long.Key = "damaged/long"
	b, err := tl.store.Open(context.Background(), seg.Key+LogSuffix)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, b.Size())
	b.ReadAt(data, 0)
	b.Close()
	storetest.Put(t, tl.store, long.Key+LogSuffix, append(data, make([]byte, 100)...)) // zeros: a bad header
	storetest.Put(t, tl.store, long.Key+IndexSuffix, nil)
	if _, err := ReadSegment(context.Background(), c, long, seg.LastOffset+1, 1<<20, 1<<40); !errors.Is(err, log.ErrCorruptBatch) {
		t.Errorf("zeros after the batches: %v; want ErrCorruptBatch", err)
	}
	torn := seg
	torn.Key = "damaged/torn"
	storetest.Put(t, tl.store, torn.Key+LogSuffix, data)
	storetest.Put(t, tl.store, torn.Key+IndexSuffix, make([]byte, 7))
	if _, err := ReadSegment(context.Background(), c, torn, 0, 1<<20, 1<<40); err == nil {
		t.Error("a torn index was read")
	}
}

// A read_committed read lists the aborted transactions with records in
// its range from the transaction indexes of its segment and the ones
// after it, up to an entry whose last stable offset reaches the range's
// end (Kafka's TransactionIndex rule); without one it says the local
// log's must be added.
func TestReadCollectsAbortedTransactions(t *testing.T) {
	t.Parallel()
	tl := newTieredLog(t, "clicks", 0, 60)
	s0, s1, s2 := tl.segments[0], tl.segments[1], tl.segments[2]
	// A transaction with records in s0 aborted in s1; one inside s1; one
	// beginning after s0 whose abort in s2 has a last stable offset past
	// the end of any read of s0.
	inS0 := log.AbortedTxn{ProducerID: 1, FirstOffset: s0.BaseOffset + 1, LastOffset: s1.BaseOffset + 1, LastStableOffset: s0.BaseOffset + 2}
	inS1 := log.AbortedTxn{ProducerID: 2, FirstOffset: s1.BaseOffset + 2, LastOffset: s1.BaseOffset + 3, LastStableOffset: s1.BaseOffset + 4}
	late := log.AbortedTxn{ProducerID: 3, FirstOffset: s1.LastOffset, LastOffset: s2.BaseOffset + 1, LastStableOffset: s2.BaseOffset + 2}
	storetest.Put(t, tl.store, s1.Key+TxnIndexSuffix, encodeTxnEntries(inS0, inS1))
	storetest.Put(t, tl.store, s2.Key+TxnIndexSuffix, encodeTxnEntries(late))
	r := NewRemoteReader(tl.index, newTestCache(t, tl.store, CacheConfig{}, nil))
	read := func(offset, maxOffset int64) Batches {
		t.Helper()
		b, err := r.Read(context.Background(), ReadRequest{Topic: "clicks", Offset: offset, MaxBytes: 1 << 20, MaxOffset: maxOffset, ReadCommitted: true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := read(s0.BaseOffset, 1<<40) // all of s0
	if !slices.Equal(b.Aborted, []log.AbortedTxn{inS0}) || !b.AbortedComplete {
		t.Errorf("read of s0: aborted %v complete %v; want %v, complete", b.Aborted, b.AbortedComplete, inS0)
	}
	b = read(s1.BaseOffset, 1<<40) // all of s1: the late one's marker is in s2
	if !slices.Equal(b.Aborted, []log.AbortedTxn{inS0, inS1, late}) || !b.AbortedComplete {
		t.Errorf("read of s1: aborted %v complete %v", b.Aborted, b.AbortedComplete)
	}
	last := tl.segments[len(tl.segments)-1]
	b = read(last.BaseOffset, 1<<40) // no entry says the walk is complete
	if len(b.Aborted) != 0 || b.AbortedComplete {
		t.Errorf("read of the last segment: aborted %v complete %v; want none, incomplete", b.Aborted, b.AbortedComplete)
	}
}

// encodeTxnEntries writes entries in broker/log's .txnindex format
// (version 0, producer ID, first offset, last offset, last stable offset).
func encodeTxnEntries(entries ...log.AbortedTxn) []byte {
	var b []byte
	for _, a := range entries {
		b = binary.BigEndian.AppendUint16(b, 0)
		for _, v := range []int64{a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}
