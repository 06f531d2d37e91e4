package kafka

// ListOffsets (key 2), versions 0–11.
//
// Special timestamps: -2 earliest (the log start offset; for a tiered
// partition with remote segments, the remote start, KIP-405), -1 latest (the
// high watermark; for read_committed the last stable offset, below which no
// transaction is still open, broker/replication/partition.go), -3 max
// timestamp (v7+, KIP-734: the record with the largest timestamp; for a
// compressed batch its base offset, as records are not decompressed), -4
// earliest local (v8+, KIP-405: the local log start offset), -5 latest
// tiered (v9+, KIP-1005: the last offset in remote storage) and -6 earliest
// pending upload (v11+, KIP-1023: the offset after the last remote one).
// Without remote segments (no tiered storage, broker/tier's RemoteIndex
// nil, or nothing uploaded yet) -5 and -6 have no answer: offset and
// timestamp -1. Any other timestamp finds the first record at or after it
// below the high watermark, as Kafka's UnifiedLog.fetchOffsetByTimestamp:
// for a partition with remote segments, in them first (broker/tier's
// RemoteReader.OffsetForTimestamp: their time index and offset index
// objects, then a batch scan, through the chunk cache), then in the local
// log (broker/log's time index); offset -1 when there is none. -3 looks
// only at the local log, as Kafka's does. v4+ answers carry the leader
// epoch of the batch holding the offset (KIP-320): for a remote answer the
// batch's, read from its header; for earliest and latest tiered below the
// local log, read from the batch through the cache within
// remote.fetch.max.wait.ms (-1 when that read fails or takes longer: the
// offset is still answered), where Kafka looks in its leader epoch cache,
// which millrace truncates at the local log start. v4+ requests' current
// leader epoch is checked.
//
// A remote search runs on the connection's goroutine, bounded by the
// request's timeout (v10+, KIP-1075) and by the reader pool's read timeout
// (30 s, as Kafka's remote.list.offsets.request.timeout.ms); one that
// runs out answers REQUEST_TIMED_OUT, as Kafka's delayed remote
// ListOffsets does when it expires, and the chunks it asked for still
// reach the cache, for the client's retry. A store failure answers
// KAFKA_STORAGE_ERROR, as a remote Fetch's does (fetch_remote.go), where
// Kafka's answers UNKNOWN_SERVER_ERROR (a RemoteStorageException is no
// API error): this one is retriable, and names the cause.
//
// Version 0 answers in its old offsets array: one offset (the one above),
// or none when there is none. Kafka's v0 listed segment base offsets for
// timestamps; that form is not reproduced. ReplicaID is ignored.

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/log"
	"millrace/broker/replication"
	"millrace/broker/tier"

	"millrace/internal/recordbatch"
)

func init() { regKey(2, 0, 11, handleListOffsets) }

// Special ListOffsets timestamps.
const (
	listLatest          = -1
	listEarliest        = -2
	listMaxTimestamp    = -3
	listEarliestLocal   = -4
	listLatestTiered    = -5
	listEarliestPending = -6
)

func handleListOffsets(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, 0, len(req.Topics))
	if req.Version >= 10 && req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorized(r, acl.Topic, rt.Topic, acl.Describe)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if !allowed {
				sp.ErrorCode, sp.Offset, sp.Timestamp = kerr.TopicAuthorizationFailed.Code, -1, -1
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			epoch := int32(replication.NoLeaderEpoch)
			if req.Version >= 4 {
				epoch = rp.CurrentLeaderEpoch
			}
			offset, ts, leaderEpoch, code := b.listOffset(ctx, rt.Topic, rp.Partition, epoch, rp.Timestamp, req.IsolationLevel)
			sp.ErrorCode = code
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, leaderEpoch
			if req.Version == 0 && code == 0 {
				sp.OldStyleOffsets = []int64{}
				if offset >= 0 && rp.MaxNumOffsets > 0 {
					sp.OldStyleOffsets = append(sp.OldStyleOffsets, offset)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listOffset answers one partition: offset, timestamp, leader epoch, error.
func (b *Broker) listOffset(ctx context.Context, topic string, partition, currentEpoch int32, timestamp int64, isolation int8) (offset, ts int64, leaderEpoch int32, code int16) {
	p, code := b.replicas.Leader(topic, partition, currentEpoch)
	if code != 0 {
		return -1, -1, -1, code
	}
	bound := p.HighWatermark()
	if isolation == 1 {
		bound = p.LastStableOffset()
	}
	ts = -1
	switch timestamp {
	case listLatest:
		offset = bound
	case listEarliest:
		offset = b.logStartOffset(topic, partition, p.Log())
		if offset < p.Log().StartOffset() {
			return offset, -1, b.remoteEpochAt(ctx, topic, partition, offset), 0
		}
	case listEarliestLocal:
		offset = p.Log().StartOffset()
	case listLatestTiered, listEarliestPending:
		if b.remoteIndex == nil {
			return -1, -1, -1, 0
		}
		_, last, ok := b.remoteIndex.RemoteBounds(topic, partition)
		if !ok {
			return -1, -1, -1, 0
		}
		if timestamp == listEarliestPending {
			last++
		}
		if last < p.Log().StartOffset() {
			return last, -1, b.remoteEpochAt(ctx, topic, partition, last), 0
		}
		return last, -1, epochAt(p.Log(), last), 0
	case listMaxTimestamp:
		maxTs := int64(-1)
		for _, s := range p.Log().Segments() {
			if s.NextOffset > p.Log().StartOffset() && s.Size > 0 {
				maxTs = max(maxTs, s.MaxTimestamp)
			}
		}
		if maxTs < 0 {
			return -1, -1, -1, 0
		}
		return b.localOffsetForTimestamp(p, topic, partition, maxTs, bound)
	default:
		found, ok, code := b.remoteOffsetForTimestamp(ctx, topic, partition, timestamp)
		switch {
		case code != 0:
			return -1, -1, -1, code
		case ok && found.Offset < bound:
			return found.Offset, found.Timestamp, found.LeaderEpoch, 0
		case ok:
			return -1, -1, -1, 0
		}
		return b.localOffsetForTimestamp(p, topic, partition, timestamp, bound)
	}
	return offset, ts, epochAt(p.Log(), offset), 0
}

// localOffsetForTimestamp answers a search by timestamp from the local log.
func (b *Broker) localOffsetForTimestamp(p replication.Partition, topic string, partition int32, timestamp, bound int64) (offset, ts int64, leaderEpoch int32, code int16) {
	offset, ts, err := p.Log().OffsetForTimestamp(timestamp)
	if err != nil {
		code, serverFault := replication.LogErrorCode(err)
		if serverFault {
			b.logger.Error("looking up an offset by timestamp", "topic", topic, "partition", partition, "err", err)
		}
		return -1, -1, -1, code
	}
	if offset < 0 || offset >= bound {
		return -1, -1, -1, 0
	}
	return offset, ts, epochAt(p.Log(), offset), 0
}

// remoteOffsetForTimestamp searches the partition's remote segments; ok
// is false when it has none or none holds a record at or after timestamp
// (the local log is searched then).
func (b *Broker) remoteOffsetForTimestamp(ctx context.Context, topic string, partition int32, timestamp int64) (found tier.TimestampOffset, ok bool, code int16) {
	if b.remoteIndex == nil {
		return found, false, 0
	}
	found, ok, err := b.remoteReads.OffsetForTimestamp(ctx, topic, partition, timestamp)
	switch {
	case err == nil:
		return found, ok, 0
	case errors.Is(err, context.DeadlineExceeded):
		b.logger.Warn("searching tiered segments by timestamp timed out", "topic", topic, "partition", partition, "timestamp", timestamp)
		return found, false, kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		return found, false, kerr.RequestTimedOut.Code // the connection is closing
	}
	b.logger.Warn("searching tiered segments by timestamp", "topic", topic, "partition", partition, "timestamp", timestamp, "err", err)
	return found, false, kerr.KafkaStorageError.Code
}

// remoteEpochAt is the leader epoch of the remote batch holding offset, -1
// when it cannot be read: the offset's answer does not wait on it.
func (b *Broker) remoteEpochAt(ctx context.Context, topic string, partition int32, offset int64) int32 {
	epoch, err := b.remoteReads.EpochAt(ctx, topic, partition, offset)
	if err != nil {
		b.logger.Warn("reading the leader epoch of a tiered batch", "topic", topic, "partition", partition, "offset", offset, "err", err)
		return -1
	}
	return epoch
}

// batchHeaderBytes is the size of a v2 record batch header.
const batchHeaderBytes = 61

// epochAt is the leader epoch of the batch holding offset; for the log end,
// the latest epoch. -1 when unknown.
func epochAt(l *log.Log, offset int64) int32 {
	if offset >= l.EndOffset() {
		return l.LatestEpoch()
	}
	slice, err := l.Read(offset, 0, l.EndOffset())
	if err != nil {
		return -1
	}
	defer slice.Close()
	var hdr [batchHeaderBytes]byte
	if _, err := io.ReadFull(slice, hdr[:]); err != nil {
		return -1
	}
	h, err := recordbatch.ParseHeader(hdr[:])
	if err != nil {
		return -1
	}
	return h.PartitionLeaderEpoch
}
