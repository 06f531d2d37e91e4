package tier

// Replicas across the boundary (KIP-405's follower fetch). A leader keeps
// only its local tail; a follower that fetches below the leader's local
// log start (a new replica of a reassignment, one that was away longer
// than local retention) gets OFFSET_MOVED_TO_TIERED_STORAGE and the
// leader's local log start L. It does not copy what is remote: it reads
// the remote state, takes the segment holding L-1 (the one ending just
// before L when the replicas' segment boundaries agree), and restarts its
// log empty at L (log.ResetTo) with
//
//   - that segment's producer snapshot (the .snapshot object), so
//     idempotent and transactional producers continue across L;
//   - the leader epoch in effect at L-1, read from the batch holding it
//     in the .log object (found through the .index object), so the
//     replica's epoch cache reaches below its local records as the
//     leader's does;
//
// then fetches from L. Its RemoteEnd is set from the state at once, so
// its local retention knows what is remote, and as leader later it
// uploads from the state's End like any leader (upload.go).
//
// Kafka's follower reads the leader's earliest local offset with
// ListOffsets (timestamp -4); millrace's leader sends it in the Fetch
// answer itself, so the follower needs no second request.

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"millrace/broker/log"
)

// maxAuxObjectBytes bounds the .snapshot and .index objects a replica
// downloads to rebuild: far above what a partition writes (an index of
// segment.index.bytes, 10 MiB by default; a snapshot of thousands of
// producers), so a larger object is a wrong one, not read into memory.
const maxAuxObjectBytes = 64 << 20

// RebuildReplica restarts the log of p, a replica this broker follows,
// empty at leaderLocalStart, the leader's local log start, with the
// leader epoch and producer state the remote segment before it carries
// (see the file's header). A partition without remote state (nothing
// uploaded yet) restarts without either.
func (m *Manager) RebuildReplica(ctx context.Context, p Partition, leaderLocalStart int64) error {
	st, _, exists, err := ReadState(m.coord, p.Topic, p.Partition)
	if err != nil {
		return err
	}
	if exists && st.TopicID != EncodeTopicID(p.TopicID) {
		return fmt.Errorf("tier: the remote state of %s-%d belongs to an earlier topic of that name (ID %s); waiting for its removal", p.Topic, p.Partition, st.TopicID)
	}
	var epochs []log.EpochEntry
	var snapshot []byte
	seg, found := segmentHolding(st, leaderLocalStart-1)
	if found {
		if snapshot, err = m.readAux(ctx, seg.Key+SnapshotSuffix); err != nil {
			return err
		}
		h, err := m.batchAt(ctx, seg, leaderLocalStart-1)
		if err != nil {
			return err
		}
		if h.PartitionLeaderEpoch >= 0 {
			epochs = []log.EpochEntry{{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset}}
		}
	}
	if err := p.Log.ResetTo(leaderLocalStart, epochs, snapshot); err != nil {
		return fmt.Errorf("tier: restarting %s-%d at the leader's local log start %d: %w", p.Topic, p.Partition, leaderLocalStart, err)
	}
	if exists {
		p.Log.SetRemoteEnd(st.End())
	}
	m.logger.LogAttrs(ctx, slog.LevelInfo, "replica restarted at the leader's local log start; the records below it are remote",
		slog.String("topic", p.Topic), slog.Int("partition", int(p.Partition)), slog.Int64("start_offset", leaderLocalStart),
		slog.Int64("remote_log_start_offset", st.LogStartOffset), slog.Int64("remote_end", st.End()), slog.Bool("from_remote_segment", found))
	return nil
}

// segmentHolding is the remote segment a reader of offset takes (the
// first whose last offset is at least offset, state.go), if it holds it.
func segmentHolding(st State, offset int64) (Segment, bool) {
	if offset < st.LogStartOffset {
		return Segment{}, false
	}
	for _, s := range st.Segments {
		if s.LastOffset >= offset {
			return s, s.BaseOffset <= offset
		}
	}
	return Segment{}, false
}

// batchAt reads the header of the batch holding offset in seg's .log
// object, jumping there through its .index object.
func (m *Manager) batchAt(ctx context.Context, seg Segment, offset int64) (log.BatchHeader, error) {
	index, err := m.readAux(ctx, seg.Key+IndexSuffix)
	if err != nil {
		return log.BatchHeader{}, err
	}
	r, err := m.store.Open(ctx, seg.Key+LogSuffix)
	if err != nil {
		return log.BatchHeader{}, fmt.Errorf("tier: opening %s: %w", seg.Key+LogSuffix, err)
	}
	defer r.Close()
	h, err := log.BatchAt(r, min(r.Size(), seg.Size), index, seg.BaseOffset, offset)
	if err != nil {
		return log.BatchHeader{}, fmt.Errorf("tier: the leader epoch at %d in %s: %w", offset, seg.Key+LogSuffix, err)
	}
	return h, nil
}

// readAux reads a whole .snapshot or .index object, refusing one larger
// than maxAuxObjectBytes.
func (m *Manager) readAux(ctx context.Context, name string) ([]byte, error) {
	r, err := m.store.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("tier: opening %s: %w", name, err)
	}
	defer r.Close()
	if r.Size() > maxAuxObjectBytes {
		return nil, fmt.Errorf("tier: %s holds %d bytes, more than any segment writes (%d); it is not this partition's", name, r.Size(), maxAuxObjectBytes)
	}
	b := make([]byte, r.Size())
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("tier: reading %s: %w", name, err)
	}
	return b, nil
}
