package log

// Restarting a replica's log from tiered storage (KIP-405's follower
// fetch): a follower whose leader keeps only a local tail cannot copy the
// records below the leader's local log start, which live in the remote
// store. It starts its log empty at that offset instead, with the leader
// epoch entries and the producer state the remote segment before it
// carried (broker/tier rebuilds them), and fetches from there.
//
// The producer snapshot a remote segment carries reflects the partition
// at the offset in its header (producer_snapshot.go), which may lie after
// the offset the log restarts at: the uploader's snapshot was the one on
// disk at upload. Such a snapshot is kept aside, in
// producer-state.pending.snapshot, while the replica copies the records
// up to its offset, and becomes the producer state (the snapshot plus the
// batches after it) once the log end reaches that offset. Until then the
// state is built from the batches copied since the restart. A leader
// append or a truncation below its offset drops it: the log's history
// then departs from the one the snapshot describes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"millrace/internal/durable"
	"millrace/internal/recordbatch"
)

// pendingProducerSnapshotFile holds a restored producer snapshot whose
// offset the log has not reached yet.
const pendingProducerSnapshotFile = "producer-state.pending.snapshot"

// EpochEntry is a leader epoch and the first offset written under it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ResetTo empties the log and restarts it at offset, whatever it held: a
// follower's log whose leader keeps the records below offset only in
// remote storage. epochs (oldest first, strictly increasing in both
// fields) become the leader epoch cache, those starting below offset: as
// in Kafka, the cache describes the remote records too, and the first
// batch copied at offset adds the entry of its own epoch. snapshot is a
// producer state snapshot file's bytes (empty: no producers); see the
// file's header for one whose offset is past offset.
func (l *Log) ResetTo(offset int64, epochs []EpochEntry, snapshot []byte) error {
	if offset < 0 {
		return fmt.Errorf("%w: cannot restart the log at %d", ErrOffsetOutOfRange, offset)
	}
	for i := 1; i < len(epochs); i++ {
		if epochs[i].Epoch <= epochs[i-1].Epoch || epochs[i].StartOffset <= epochs[i-1].StartOffset {
			return fmt.Errorf("log: restarting at %d: leader epoch entries %v are not strictly increasing", offset, epochs)
		}
	}
	var snap producerSnapshot
	if len(snapshot) > 0 {
		var err error
		if snap, err = decodeProducerSnapshot(snapshot); err != nil {
			return fmt.Errorf("log: restarting at %d: %w", offset, err)
		}
	}
	ps := &l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if err := l.truncateFullyLocked(offset); err != nil {
		return err
	}
	kept := make([]epochEntry, 0, len(epochs))
	for _, e := range epochs {
		if e.StartOffset < offset {
			kept = append(kept, epochEntry{epoch: e.Epoch, startOffset: e.StartOffset})
		}
	}
	l.mu.Lock()
	l.epochs = kept
	l.mu.Unlock()
	if err := l.persistEpochsLocked(); err != nil {
		return err
	}
	ps.producers, ps.pending, ps.verifying = map[int64]*producerEntry{}, nil, nil
	if err := removeIfExists(filepath.Join(l.dir, pendingProducerSnapshotFile)); err != nil {
		return fmt.Errorf("log: restarting at %d: %w", offset, err)
	}
	if snap.producers != nil && snap.offset <= offset {
		// Taken as the state at offset: the batches between its offset
		// and this one are not in the log to replay.
		ps.producers = snap.producers
	}
	ps.loaded, ps.dirty = true, true
	l.txnStateLoaded.Store(true)
	ps.recomputeFirstUnstableLocked()
	if err := l.writeProducerSnapshotLocked(); err != nil {
		return fmt.Errorf("log: restarting at %d: %w", offset, err)
	}
	if snap.producers != nil && snap.offset > offset {
		if err := durable.WriteFile(filepath.Join(l.dir, pendingProducerSnapshotFile), snapshot); err != nil {
			return fmt.Errorf("log: restarting at %d: keeping the producer snapshot of offset %d: %w", offset, snap.offset, err)
		}
		ps.pending = &snap
	}
	l.logger.Info("restarted empty", "start_offset", offset, "leader_epochs", len(kept), "producer_snapshot_offset", snap.offset)
	return nil
}

// loadPendingProducerSnapshot reads the pending snapshot ResetTo kept, if
// any (Open). An unreadable one is dropped: the state is then built from
// the log, as after losing any snapshot.
func (l *Log) loadPendingProducerSnapshot() error {
	path := filepath.Join(l.dir, pendingProducerSnapshotFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	snap, err := decodeProducerSnapshot(b)
	if err != nil {
		l.logger.Warn("dropping an unreadable pending producer state snapshot", "err", err)
		return os.Remove(path)
	}
	l.producers.pending = &snap
	return nil
}

// settlePendingLocked installs the pending producer snapshot once a
// replicated append reached its offset, or drops it after a leader append
// (replicated false) or a truncation below it. Caller holds the producer
// lock.
func (l *Log) settlePendingLocked(replicated bool) {
	ps := &l.producers
	if ps.pending == nil {
		return
	}
	end := l.EndOffset()
	path := filepath.Join(l.dir, pendingProducerSnapshotFile)
	if replicated && end < ps.pending.offset {
		return
	}
	if replicated {
		if err := writeProducerSnapshot(l.dir, *ps.pending); err != nil {
			l.logger.Warn("installing the restored producer state snapshot; the state stays built from the log", "err", err)
		} else if err := l.rebuildProducersLocked(); err != nil {
			l.logger.Warn("rebuilding the producer state from the restored snapshot", "err", err)
		}
	} else {
		l.logger.Info("dropping the restored producer state snapshot: the log departs from its history", "snapshot_offset", ps.pending.offset, "log_end", end)
	}
	ps.pending = nil
	if err := removeIfExists(path); err != nil {
		l.logger.Warn("removing the pending producer state snapshot", "err", err)
	}
}

// BatchAt returns the header of the batch holding offset in a segment
// file (base offset base, size bytes) read through r, with the segment's
// offset index (its .index file's bytes, possibly empty) to start near
// it: its PartitionLeaderEpoch is the epoch in effect at offset. A tiered
// segment's objects are these files, so broker/tier reads a remote
// segment's epochs with it.
func BatchAt(r io.ReaderAt, size int64, index []byte, base, offset int64) (BatchHeader, error) {
	if offset < base || offset-base > maxRelativeOffset {
		return BatchHeader{}, fmt.Errorf("log: offset %d is not in the segment at %d", offset, base)
	}
	entries := len(index) / offsetIndexEntrySize
	rel := uint32(offset - base)
	i := sort.Search(entries, func(i int) bool {
		return binary.BigEndian.Uint32(index[i*offsetIndexEntrySize+offsetEntryRel:]) > rel
	})
	pos := int64(0)
	if i > 0 {
		pos = int64(binary.BigEndian.Uint32(index[(i-1)*offsetIndexEntrySize+offsetEntryPos:]))
	}
	var b [recordbatch.HeaderSize]byte
	for pos+int64(len(b)) <= size {
		if _, err := r.ReadAt(b[:], pos); err != nil {
			return BatchHeader{}, fmt.Errorf("log: reading the batch header at %d: %w", pos, err)
		}
		h, err := recordbatch.ParseHeader(b[:])
		if err != nil || h.Size() <= 0 {
			return BatchHeader{}, fmt.Errorf("log: malformed batch header at %d of the segment at %d", pos, base)
		}
		if h.LastOffset() >= offset {
			if h.BaseOffset > offset {
				return BatchHeader{}, fmt.Errorf("log: offset %d falls in a gap of the segment at %d", offset, base)
			}
			return h, nil
		}
		pos += int64(h.Size())
	}
	return BatchHeader{}, fmt.Errorf("log: offset %d is past the end of the segment at %d", offset, base)
}
