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
// below the high watermark in the local log (broker/log's time index), or
// offset -1 when there is none; remote segments' time indexes are not
// searched. v4+ answers carry the leader epoch of the batch holding the
// offset (-1 for an offset only in remote storage), and check the current
// leader epoch (KIP-320).
//
// Version 0 answers in its old offsets array: one offset (the one above),
// or none when there is none. Kafka's v0 listed segment base offsets for
// timestamps; that form is not reproduced. ReplicaID and TimeoutMillis
// (v10+) are ignored: answers are immediate.

import (
	"context"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/log"
	"millrace/broker/replication"

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

func handleListOffsets(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, 0, len(req.Topics))
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
			offset, ts, leaderEpoch, code := b.listOffset(rt.Topic, rp.Partition, epoch, rp.Timestamp, req.IsolationLevel)
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
func (b *Broker) listOffset(topic string, partition, currentEpoch int32, timestamp int64, isolation int8) (offset, ts int64, leaderEpoch int32, code int16) {
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
		timestamp = maxTs
		fallthrough
	default:
		var err error
		offset, ts, err = p.Log().OffsetForTimestamp(timestamp)
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
	}
	return offset, ts, epochAt(p.Log(), offset), 0
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
