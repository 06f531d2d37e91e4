package tier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"millrace/broker/log"
	"millrace/internal/recordbatch"
	"millrace/store"
)

// RemoteIndex is what the read side needs of a partition's remote state:
// where its remote data starts and ends, and which segment holds an
// offset. The write side's state implements it. Its methods answer from
// memory (the Fetch and ListOffsets handlers call them for every partition
// they serve) and are safe for concurrent use.
type RemoteIndex interface {
	// RemoteBounds returns the first and last offsets held in the
	// partition's remote segments; ok is false when it has none (the
	// topic is not tiered, or nothing is uploaded yet).
	RemoteBounds(topic string, partition int32) (start, last int64, ok bool)
	// SegmentFor returns the remote segment a read of offset starts in:
	// the first, in the state's order (last offsets increasing), whose
	// LastOffset is at or above offset (the one holding offset, or the
	// next one after a gap). ok is false when there is none.
	SegmentFor(topic string, partition int32, offset int64) (Segment, bool)
}

// ReadRequest is one remote read: a partition's batches from Offset.
type ReadRequest struct {
	Topic     string
	Partition int32
	// Offset is the fetch offset; the first batch returned is the one
	// holding it, so it may start below.
	Offset int64
	// MaxBytes bounds the batches returned, except that the first is
	// returned whole even if larger (KIP-74), as broker/log's Log.Read.
	MaxBytes int
	// MaxOffset bounds the offsets returned: only batches whose last
	// offset is below it (the high watermark or last stable offset).
	MaxOffset int64
	// ReadCommitted asks for the aborted transactions with records in the
	// range returned (KIP-98), from the segments' transaction indexes.
	ReadCommitted bool
}

// Batches is what a remote read returns: whole record batches of one
// segment (a read never spans two, as a local one never does).
type Batches struct {
	// Records holds the batches, byte for byte as stored; empty when the
	// segment has nothing at or after the offset below MaxOffset.
	Records []byte
	// FirstOffset is the first batch's base offset, NextOffset the offset
	// after the last one; both are the requested offset when Records is
	// empty.
	FirstOffset, NextOffset int64
	// Aborted lists, for a ReadCommitted read, the aborted transactions
	// whose markers are in remote segments, with records in
	// [Offset, NextOffset). AbortedComplete tells that no marker after the
	// remote segments can concern the range (an entry's last stable
	// offset reached NextOffset, as Kafka's TransactionIndex decides);
	// when it is false the caller adds the local log's.
	Aborted         []log.AbortedTxn
	AbortedComplete bool
}

// Reader reads record batches below the local log, from remote storage,
// and answers ListOffsets' questions of them (read_time.go).
type Reader interface {
	Read(ctx context.Context, req ReadRequest) (Batches, error)
	// OffsetForTimestamp finds the first remote record with a
	// timestamp at or after ts; ok is false when there is none.
	OffsetForTimestamp(ctx context.Context, topic string, partition int32, ts int64) (found TimestampOffset, ok bool, err error)
	// EpochAt returns the leader epoch of the remote batch holding
	// offset.
	EpochAt(ctx context.Context, topic string, partition int32, offset int64) (int32, error)
}

// ErrNotRemote is returned (wrapped) by a read of an offset that no remote
// segment holds: the Fetch answers OFFSET_OUT_OF_RANGE.
var ErrNotRemote = errors.New("tier: offset is in no remote segment")

// RemoteReader is the Reader of tiered segments: it finds the segment in
// its RemoteIndex and reads its objects through a Cache.
type RemoteReader struct {
	index RemoteIndex
	cache *Cache
}

// NewRemoteReader returns a reader of index's segments through cache.
func NewRemoteReader(index RemoteIndex, cache *Cache) *RemoteReader {
	return &RemoteReader{index: index, cache: cache}
}

// Read reads the batches of req from the remote segment holding its offset.
func (r *RemoteReader) Read(ctx context.Context, req ReadRequest) (Batches, error) {
	segment, ok := r.index.SegmentFor(req.Topic, req.Partition, req.Offset)
	if !ok {
		return Batches{}, fmt.Errorf("%w: %s-%d offset %d", ErrNotRemote, req.Topic, req.Partition, req.Offset)
	}
	b, err := ReadSegment(ctx, r.cache, segment, req.Offset, req.MaxBytes, req.MaxOffset)
	if err != nil || !req.ReadCommitted || len(b.Records) == 0 {
		return b, err
	}
	b.Aborted, b.AbortedComplete, err = r.aborted(ctx, req, segment, b.NextOffset)
	return b, err
}

// aborted collects the aborted transactions with records in
// [req.Offset, to) from the transaction indexes of segment and the remote
// segments after it. A transaction's entry is in the segment of its abort
// marker, which may come segments later than its records, so the walk goes
// on until an entry's last stable offset reaches to: every transaction
// still open at to had begun by then, and every later marker ends one
// that begins at or after it.
func (r *RemoteReader) aborted(ctx context.Context, req ReadRequest, segment Segment, to int64) ([]log.AbortedTxn, bool, error) {
	var out []log.AbortedTxn
	for {
		entries, err := r.txnIndex(ctx, segment)
		if err != nil {
			return nil, false, err
		}
		complete := false
		for _, a := range entries {
			if a.LastOffset >= req.Offset && a.FirstOffset < to {
				out = append(out, a)
			}
			complete = complete || a.LastStableOffset >= to
		}
		if complete {
			return out, true, nil
		}
		next, ok := r.index.SegmentFor(req.Topic, req.Partition, segment.LastOffset+1)
		if !ok || next.LastOffset <= segment.LastOffset {
			return out, false, nil
		}
		segment = next
	}
}

// maxTxnIndexBytes bounds the transaction index object read whole: a
// million aborted transactions in one segment.
const maxTxnIndexBytes = 34 << 20

// txnIndex reads a segment's transaction index; a missing object is an
// empty index (the log writes no file for a segment without aborts).
func (r *RemoteReader) txnIndex(ctx context.Context, segment Segment) ([]log.AbortedTxn, error) {
	o := r.cache.Object(ctx, segment.Key+TxnIndexSuffix)
	size, err := o.Size()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case size > maxTxnIndexBytes:
		return nil, fmt.Errorf("tier: transaction index %s%s of %d bytes is larger than %d", segment.Key, TxnIndexSuffix, size, maxTxnIndexBytes)
	}
	b := make([]byte, size)
	if _, err := o.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	entries, err := log.DecodeTxnIndex(b)
	if err != nil {
		return nil, fmt.Errorf("tier: transaction index %s%s: %w", segment.Key, TxnIndexSuffix, err)
	}
	return entries, nil
}

// ReadSegment reads whole batches of one remote segment from the one
// holding offset, as broker/log's Log.Read reads a local one: the offset
// index object gives the position of the last indexed batch at or below
// offset, batch headers are scanned from there to the first batch whose
// last offset is at or above it, and batches follow while they fit in
// maxBytes (the first whole even if larger, KIP-74) and end below
// maxOffset.
func ReadSegment(ctx context.Context, cache *Cache, segment Segment, offset int64, maxBytes int, maxOffset int64) (Batches, error) {
	index := cache.Object(ctx, segment.Key+IndexSuffix)
	indexSize, err := index.Size()
	if err != nil {
		return Batches{FirstOffset: offset, NextOffset: offset}, err
	}
	return readBatches(index, indexSize, cache.Object(ctx, segment.Key+LogSuffix), segment, offset, maxBytes, maxOffset)
}

// readBatches is ReadSegment over the segment's index and data; it trusts
// neither (a fuzz target feeds it arbitrary bytes): positions and lengths
// are checked against segment.Size before anything is read or allocated.
func readBatches(index io.ReaderAt, indexSize int64, data io.ReaderAt, segment Segment, offset int64, maxBytes int, maxOffset int64) (Batches, error) {
	empty := Batches{FirstOffset: offset, NextOffset: offset}
	rel := min(max(offset-segment.BaseOffset, 0), math.MaxUint32)
	pos, err := log.SearchOffsetIndex(index, indexSize, uint32(rel))
	if err != nil {
		return empty, fmt.Errorf("tier: offset index of %s: %w", segment.Key, err)
	}
	var first batchSpan
	for {
		first, err = spanAt(data, segment, pos)
		if err != nil {
			return empty, err
		}
		if first.size == 0 {
			return empty, nil
		}
		if first.last >= offset {
			break
		}
		pos += first.size
	}
	if first.last >= maxOffset {
		return empty, nil
	}
	total, next := first.size, first.last+1
	for {
		b, err := spanAt(data, segment, pos+total)
		if err != nil {
			return empty, err
		}
		if b.size == 0 || b.last >= maxOffset || total+b.size > int64(maxBytes) {
			break
		}
		total += b.size
		next = b.last + 1
	}
	records := make([]byte, total)
	if n, err := data.ReadAt(records, pos); int64(n) < total {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return empty, fmt.Errorf("tier: reading %s%s at %d: %w", segment.Key, LogSuffix, pos, err)
	}
	return Batches{Records: records, FirstOffset: first.base, NextOffset: next}, nil
}

// batchSpan is where one batch lies.
type batchSpan struct {
	base, last int64
	size       int64 // 0 at the end of the segment
	epoch      int32 // its partition leader epoch
}

// spanHeaderSize is the part of a batch header a scan reads: base offset,
// length, leader epoch, magic, CRC, attributes and last offset delta.
const spanHeaderSize = recordbatch.PosLastOffsetDelta + 4

// spanAt reads the header of the batch at pos of a segment's .log object.
func spanAt(data io.ReaderAt, segment Segment, pos int64) (batchSpan, error) {
	if pos+recordbatch.HeaderSize > segment.Size {
		return batchSpan{}, nil
	}
	var hdr [spanHeaderSize]byte
	if n, err := data.ReadAt(hdr[:], pos); n < len(hdr) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return batchSpan{}, fmt.Errorf("tier: reading a batch header of %s%s at %d: %w", segment.Key, LogSuffix, pos, err)
	}
	base := int64(binary.BigEndian.Uint64(hdr[recordbatch.PosBaseOffset:]))
	size := int64(int32(binary.BigEndian.Uint32(hdr[recordbatch.PosLength:]))) + recordbatch.LengthOverhead
	delta := int64(int32(binary.BigEndian.Uint32(hdr[recordbatch.PosLastOffsetDelta:])))
	if size < recordbatch.HeaderSize || pos+size > segment.Size || delta < 0 {
		return batchSpan{}, fmt.Errorf("%w: remote segment %s has a bad batch header at %d", log.ErrCorruptBatch, segment.Key, pos)
	}
	epoch := int32(binary.BigEndian.Uint32(hdr[recordbatch.PosLeaderEpoch:]))
	return batchSpan{base: base, last: base + delta, size: size, epoch: epoch}, nil
}
