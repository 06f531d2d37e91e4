package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"millrace/broker/log"
	"millrace/internal/recordbatch"
)

// Searches of remote segments for ListOffsets (KIP-405). A search by
// timestamp goes as Kafka's RemoteLogManager.findOffsetByTimestamp: the
// remote segments in offset order, skipping those whose largest timestamp
// is below the target; in a candidate, its time index object gives the
// offset below which every record is older, its offset index the position
// of that offset, and batch headers are scanned from there for the first
// batch reaching the target, whose first record at or after it is the
// answer, with the batch's partition leader epoch. It reads through the
// chunk cache, so a search repeated after a timeout finds its chunks.

// TimestampOffset is the answer of a search by timestamp.
type TimestampOffset struct {
	Offset, Timestamp int64
	// LeaderEpoch is the partition leader epoch of the batch holding
	// Offset, -1 when the batch has none.
	LeaderEpoch int32
}

// OffsetForTimestamp finds the first remote record at or after the remote
// log start with a timestamp at or after ts; found is false when no remote
// record has one (the caller then searches the local log). For a
// compressed or LogAppendTime batch the answer is its first offset and its
// largest timestamp, as broker/log's Log.OffsetForTimestamp answers.
func (r *RemoteReader) OffsetForTimestamp(ctx context.Context, topic string, partition int32, ts int64) (found TimestampOffset, ok bool, err error) {
	offset, _, remote := r.index.RemoteBounds(topic, partition)
	if !remote {
		return TimestampOffset{}, false, nil
	}
	for {
		segment, inIndex := r.index.SegmentFor(topic, partition, offset)
		if !inIndex {
			return TimestampOffset{}, false, nil
		}
		if segment.MaxTimestamp >= ts {
			found, ok, err = searchSegment(ctx, r.cache, segment, ts, offset)
			if err != nil || ok {
				return found, ok, err
			}
		}
		// Segments overlap after a leader change: the next one is
		// searched from the first offset this one did not hold.
		offset = segment.LastOffset + 1
	}
}

// EpochAt returns the partition leader epoch of the remote batch holding
// offset (-1 when the batch has none); ErrNotRemote when no remote segment
// holds it.
func (r *RemoteReader) EpochAt(ctx context.Context, topic string, partition int32, offset int64) (int32, error) {
	segment, ok := r.index.SegmentFor(topic, partition, offset)
	if !ok {
		return -1, fmt.Errorf("%w: %s-%d offset %d", ErrNotRemote, topic, partition, offset)
	}
	pos, err := positionOf(ctx, r.cache, segment, relative(segment, offset))
	if err != nil {
		return -1, err
	}
	data := r.cache.Object(ctx, segment.Key+LogSuffix)
	for {
		span, err := spanAt(data, segment, pos)
		if err != nil {
			return -1, err
		}
		if span.size == 0 {
			return -1, fmt.Errorf("%w: %s-%d offset %d is past the end of %s", ErrNotRemote, topic, partition, offset, segment.Key)
		}
		if span.last >= offset {
			return max(span.epoch, -1), nil
		}
		pos += span.size
	}
}

// relative is offset relative to segment's base, clamped to the index's
// uint32 range.
func relative(segment Segment, offset int64) uint32 {
	return uint32(min(max(offset-segment.BaseOffset, 0), math.MaxUint32))
}

// positionOf is where a scan for the relative offset rel may start in
// segment's .log object, from its offset index object.
func positionOf(ctx context.Context, cache *Cache, segment Segment, rel uint32) (int64, error) {
	index := cache.Object(ctx, segment.Key+IndexSuffix)
	size, err := index.Size()
	if err != nil {
		return 0, err
	}
	pos, err := log.SearchOffsetIndex(index, size, rel)
	if err != nil {
		return 0, fmt.Errorf("tier: offset index of %s: %w", segment.Key, err)
	}
	return pos, nil
}

// searchSegment searches one segment for the first record at or after
// from with a timestamp at or after ts.
func searchSegment(ctx context.Context, cache *Cache, segment Segment, ts, from int64) (TimestampOffset, bool, error) {
	timeIndex := cache.Object(ctx, segment.Key+TimeIndexSuffix)
	size, err := timeIndex.Size()
	if err != nil {
		return TimestampOffset{}, false, err
	}
	rel, err := log.SearchTimeIndex(timeIndex, size, ts)
	if err != nil {
		return TimestampOffset{}, false, fmt.Errorf("tier: time index of %s: %w", segment.Key, err)
	}
	pos, err := positionOf(ctx, cache, segment, max(rel, relative(segment, from)))
	if err != nil {
		return TimestampOffset{}, false, err
	}
	return scanForTimestamp(cache.Object(ctx, segment.Key+LogSuffix), segment, pos, ts, from)
}

// scanForTimestamp scans the batches of segment's .log object from pos. It
// trusts no header: sizes are checked against segment.Size before a body
// is read.
func scanForTimestamp(data io.ReaderAt, segment Segment, pos, ts, from int64) (TimestampOffset, bool, error) {
	var hdr [recordbatch.HeaderSize]byte
	for pos+recordbatch.HeaderSize <= segment.Size {
		if err := readFull(data, hdr[:], segment, pos); err != nil {
			return TimestampOffset{}, false, err
		}
		h := recordbatch.HeaderAt(hdr[:])
		size := int64(h.Size())
		if size < recordbatch.HeaderSize || pos+size > segment.Size || h.LastOffsetDelta < 0 {
			return TimestampOffset{}, false, fmt.Errorf("%w: remote segment %s has a bad batch header at %d", log.ErrCorruptBatch, segment.Key, pos)
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= from {
			epoch := max(h.PartitionLeaderEpoch, -1)
			if h.LogAppendTime() || h.Compression() != 0 {
				return TimestampOffset{Offset: max(h.BaseOffset, from), Timestamp: h.MaxTimestamp, LeaderEpoch: epoch}, true, nil
			}
			body := make([]byte, size-recordbatch.HeaderSize)
			if err := readFull(data, body, segment, pos+recordbatch.HeaderSize); err != nil {
				return TimestampOffset{}, false, err
			}
			found := TimestampOffset{Offset: -1}
			recordbatch.RecordTimestamps(body, h.FirstTimestamp, func(delta, recordTs int64) bool {
				if offset := h.BaseOffset + delta; offset >= from && recordTs >= ts {
					found = TimestampOffset{Offset: offset, Timestamp: recordTs, LeaderEpoch: epoch}
					return false
				}
				return true
			})
			if found.Offset >= 0 {
				return found, true, nil
			}
		}
		pos += size
	}
	return TimestampOffset{}, false, nil
}

// readFull reads len(b) bytes of segment's .log object at pos.
func readFull(data io.ReaderAt, b []byte, segment Segment, pos int64) error {
	if n, err := data.ReadAt(b, pos); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("tier: reading %s%s at %d: %w", segment.Key, LogSuffix, pos, err)
	}
	return nil
}
