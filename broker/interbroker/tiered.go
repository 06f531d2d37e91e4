package interbroker

// Following a tiered partition across its leader's local log start
// (KIP-405's follower fetch). The leader answers a fetch below its local
// log start with OFFSET_MOVED_TO_TIERED_STORAGE and that start in the
// answer's log_start_offset (broker/kafka/fetch_tiered_replica.go); the
// follower then does not copy the remote records: it restarts its log
// empty at the leader's local start, with the leader epoch and producer
// state the remote state gives (broker/tier/replica.go, injected as
// RemoteRebuild), and fetches on from there. The same applies to an
// OFFSET_OUT_OF_RANGE below the leader's log start on a tiered partition:
// its records have left remote storage too (total retention).

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/replication"
)

// RemoteRebuild restarts p's log empty at leaderLocalStart from the
// partition's remote state (broker/tier's Manager.RebuildReplica).
type RemoteRebuild func(ctx context.Context, p *replication.Followed, leaderLocalStart int64) error

// RebuildFromRemote lets the fetchers follow tiered partitions below
// their leaders' local log start through rebuild. Without it such a
// partition waits, logging why. Set before the first Follow.
func (fs *Fetchers) RebuildFromRemote(rebuild RemoteRebuild) { fs.rebuild = rebuild }

// errNoTieredStorage: the leader holds a partition's early records only
// remotely, and this broker has no tiered storage to rebuild from.
var errNoTieredStorage = errors.New("the leader keeps the records this replica lacks only in remote storage, and this broker has tiered storage off (remote.log.storage.system.enable)")

// movedToRemote reports whether a fetch answer asks fp to restart at the
// leader's local log start: OFFSET_MOVED_TO_TIERED_STORAGE, or on a
// tiered partition an OFFSET_OUT_OF_RANGE below the leader's log start.
func movedToRemote(fp *fetchedPartition, sp *kmsg.FetchResponseTopicPartition) bool {
	switch sp.ErrorCode {
	case kerr.OffsetMovedToTieredStorage.Code:
		return true
	case kerr.OffsetOutOfRange.Code:
		l := fp.p.Log
		return l.Config().RemoteStorageEnable && sp.LogStartOffset > l.EndOffset()
	}
	return false
}

// rebuildFromRemote restarts fp's log at leaderLocalStart; the next round
// fetches from there.
func (lf *leaderFetcher) rebuildFromRemote(ctx context.Context, fp *fetchedPartition, leaderLocalStart int64) error {
	if lf.fs.rebuild == nil {
		return errNoTieredStorage
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.removed {
		return nil
	}
	l := fp.p.Log
	from := l.EndOffset()
	if err := lf.fs.rebuild(ctx, fp.p, leaderLocalStart); err != nil {
		return fmt.Errorf("%w: restarting at the leader's local log start %d from remote storage: %w", errRetry, leaderLocalStart, err)
	}
	lf.fs.logger.Info("restarted the log at the leader's local log start; the records below it are in remote storage",
		"topic", fp.p.Topic, "partition", fp.p.Partition, "from", from, "to", l.StartOffset(), "leader", lf.leader, "leader_epoch", fp.p.Epoch)
	return nil
}
