package replication

import (
	"millrace/broker/log"
)

// Follower copies partitions from their leaders: the inter-broker fetcher,
// which lives with the inter-broker client. The manager tells it when to
// start and stop following; everything it learns about the partition's
// high watermark comes back through the Followed handle.
type Follower interface {
	// Follow starts copying f's partition from f.Leader at leader epoch
	// f.Epoch: truncate by leader epoch, then fetch and append. stop ends
	// it and returns only once nothing more will be appended.
	Follow(f *Followed) (stop func())
}

// Followed is a partition this broker follows, as its follower sees it.
type Followed struct {
	// TopicPartition names the partition.
	log.TopicPartition
	// Log is the local replica's log.
	Log *log.Log
	// Leader and Epoch are the leader followed and its leader epoch.
	Leader, Epoch int32

	h *hosted
}

// HighWatermark is the last high watermark this follower heard from its
// leader (or the checkpointed one after a restart): truncation by leader
// epoch falls back to it when the leader cannot answer by epoch.
func (f *Followed) HighWatermark() int64 { return f.h.highWatermark.Load() }

// SetHighWatermark records the high watermark the leader sent with a
// fetch answer (replica.FollowerHighWatermark bounds it): consumers the
// leader sent here read below it (KIP-392), so their long polls wake when
// it moves.
func (f *Followed) SetHighWatermark(hw int64) {
	if f.h.highWatermark.Swap(hw) != hw {
		f.h.m.NotifyData(f.Topic, f.Partition)
	}
}

// following is a running Follow.
type following struct {
	leader, epoch int32
	stop          func()
}

// startFollowingLocked starts following leader at epoch.
func (h *hosted) startFollowingLocked(leader, epoch int32) {
	if h.m.follower == nil {
		return
	}
	stop := h.m.follower.Follow(&Followed{TopicPartition: h.tp, Log: h.log, Leader: leader, Epoch: epoch, h: h})
	h.following = &following{leader: leader, epoch: epoch, stop: stop}
	h.m.logger.Info("following", "topic", h.tp.Topic, "partition", h.tp.Partition, "leader", leader, "leader_epoch", epoch)
}

// stopFollowingLocked stops the follower and waits for it, so that nothing
// appends once it returns.
func (h *hosted) stopFollowingLocked() {
	f := h.following
	if f == nil {
		return
	}
	h.following = nil
	f.stop()
}
