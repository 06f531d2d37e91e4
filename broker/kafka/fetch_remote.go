package kafka

// Fetches below the local log start of a tiered partition (KIP-405; the
// read side is broker/tier). A consumer's fetch offset in
// [remote start, local log start) is read from remote storage, off the
// Fetch's goroutine: the read is submitted to the broker's tier.ReadPool,
// and the Fetch waits for it as Kafka's DelayedRemoteFetch does, for
// remote.fetch.max.wait.ms at most (KIP-1018; tier.ReadPoolConfig.MaxWait),
// whatever the request's max_wait_ms and min_bytes. A read not done by then
// leaves its partition without records (and without an error) while the
// read goes on into the chunk cache; so a store that is slow or down holds
// neither the local partitions of the same Fetch nor the Fetches pipelined
// after it on the connection (responses leave in request order) longer
// than that. The partitions of a Fetch are read in request order, remote
// ones included, within the same byte budget: a remote read's answer counts
// against max_bytes when it comes, and is dropped, as a local one is, when
// it no longer fits and is not the first (KIP-74).
//
// A consumer sees the remote start as the log start offset (log_start_offset
// in every answer, and ListOffsets earliest), as Kafka reports it.
// Followers are not served from remote storage: their fetch below the local
// log start gets OFFSET_MOVED_TO_TIERED_STORAGE, and the follower builds
// its state from the remote metadata (fetch_tiered_replica.go), as Kafka's
// do.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"
	"millrace/broker/replication"
	"millrace/broker/tier"
)

// remoteFetches are one Fetch's remote reads, kept across its passes.
type remoteFetches struct {
	pool *tier.ReadPool
	// reads holds each partition's read, submitted on the first pass that
	// needed it; nil for one the full pool refused, which waits out
	// MaxWait like a read that does not complete.
	reads map[log.TopicPartition]*tier.PendingRead
	// notify gets a value when any of the reads completes.
	notify chan struct{}
	// waiting counts the reads of the last pass not yet complete.
	waiting int
}

// newRemoteFetches returns nil when no topic is tiered.
func (b *Broker) newRemoteFetches() *remoteFetches {
	if b.remoteIndex == nil {
		return nil
	}
	return &remoteFetches{pool: b.remoteReads, reads: map[log.TopicPartition]*tier.PendingRead{}, notify: make(chan struct{}, 1)}
}

// startPass resets the count of reads still running.
func (rf *remoteFetches) startPass() {
	if rf != nil {
		rf.waiting = 0
	}
}

// pending is the number of reads of the last pass still running.
func (rf *remoteFetches) pending() int {
	if rf == nil {
		return 0
	}
	return rf.waiting
}

// completed is signalled when a read completes; nil (never) without reads.
func (rf *remoteFetches) completed() <-chan struct{} {
	if rf == nil {
		return nil
	}
	return rf.notify
}

// logStartOffset is the partition's log start offset as consumers see it:
// the remote start when the partition has remote segments below its local
// log.
func (b *Broker) logStartOffset(topic string, partition int32, l *log.Log) int64 {
	local := l.StartOffset()
	if b.remoteIndex == nil {
		return local
	}
	if start, _, ok := b.remoteIndex.RemoteBounds(topic, partition); ok {
		return min(start, local)
	}
	return local
}

// fetchRemote serves a consumer's fetch of one partition from remote
// storage when its offset is below the local log and at or above the
// remote start, setting sp's records (or error) when the read is done. It
// returns false when the partition is to be read locally. limit, first,
// bound and readCommitted are fetchPartition's.
func (b *Broker) fetchRemote(rf *remoteFetches, p replication.Partition, topic string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, limit int64, first bool, bound int64, readCommitted bool) bool {
	if rf == nil {
		return false
	}
	start, _, ok := b.remoteIndex.RemoteBounds(topic, rp.Partition)
	if !ok || rp.FetchOffset < start || rp.FetchOffset >= p.Log().StartOffset() {
		return false
	}
	key := log.TopicPartition{Topic: topic, Partition: rp.Partition}
	read, submitted := rf.reads[key]
	if !submitted {
		read, _ = rf.pool.Submit(tier.ReadRequest{
			Topic: topic, Partition: rp.Partition, Offset: rp.FetchOffset,
			MaxBytes: int(max(min(limit, int64(maxInt32)), 0)), MaxOffset: bound, ReadCommitted: readCommitted,
		}, rf.notify)
		rf.reads[key] = read
	}
	if read == nil {
		rf.waiting++
		return true
	}
	select {
	case <-read.Done():
	default:
		rf.waiting++
		return true
	}
	batches, err := read.Result()
	switch {
	case errors.Is(err, tier.ErrNotRemote):
		// Remote retention or a gap moved the data away meanwhile.
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return true
	case err != nil:
		b.logger.Warn("reading a tiered segment", "topic", topic, "partition", rp.Partition, "offset", rp.FetchOffset, "err", err)
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return true
	}
	if len(batches.Records) == 0 || (!first && int64(len(batches.Records)) > limit) {
		return true
	}
	if readCommitted {
		aborted := batches.Aborted
		if !batches.AbortedComplete {
			local, err := p.Log().AbortedTransactions(rp.FetchOffset, batches.NextOffset)
			if err != nil {
				b.logger.Error("listing aborted transactions", "topic", topic, "partition", rp.Partition, "err", err)
				sp.ErrorCode = kerr.KafkaStorageError.Code
				return true
			}
			aborted = mergeAborted(aborted, local)
		}
		for _, a := range aborted {
			sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	sp.RecordBatches = batches.Records
	return true
}

// mergeAborted adds to remote the local entries it lacks: a segment both
// uploaded and still local lists its aborts in both.
func mergeAborted(remote, local []log.AbortedTxn) []log.AbortedTxn {
	seen := make(map[log.AbortedTxn]bool, len(remote))
	for _, a := range remote {
		seen[a] = true
	}
	for _, a := range local {
		if !seen[a] {
			remote = append(remote, a)
		}
	}
	return remote
}
