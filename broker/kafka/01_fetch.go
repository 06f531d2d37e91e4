package kafka

// Fetch (key 1), versions 4–18; a blocking handler (long poll).
//
// Versions 0–3 return the old message-set format, which millrace does not
// store (see 00_produce.go); v4 is the first with v2 record batches. From
// v13 topics are named by ID (KIP-516); an unknown ID gets UNKNOWN_TOPIC_ID.
//
// Partitions are read in request order. Each gets at most its
// partition_max_bytes and the response at most max_bytes of records, in whole
// batches; the first batch of the first partition with data is always
// returned whole even if it is larger than both limits, so a consumer always
// progresses (KIP-74). Consumers read below the high watermark (the log end
// on a single broker, see replication.Partition.HighWatermark), followers
// (replica ID >= 0) up to the log end. Every answer carries the last stable
// offset (broker/replication/partition.go); read_committed consumers
// (isolation_level 1) read below it and get the aborted transactions with
// records in the range returned, which they drop (KIP-98). An offset outside
// [log start, log end] gets OFFSET_OUT_OF_RANGE, except a replica's below a
// tiered partition's local log start, which gets
// OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405, fetch_tiered_replica.go); the
// current leader epoch (v9+) is checked as in KIP-320.
//
// Fetch from the closest replica (KIP-392, fetch_read_replica.go): with
// replica.selector.class set, the leader answers a consumer (v11+) in the
// rack of an in-sync follower with that follower as preferred_read_replica
// and no records, at once; a follower serves consumers (v11+) below its own
// high watermark. Without it the preferred read replica is -1.
//
// Long poll: when fewer than min_bytes are available, no partition has an
// error and max_wait_ms is positive, the handler waits for an append to any
// requested partition (broker/replication/waiters.go: woken by Produce, never
// polling), for max_wait_ms, or for the connection or broker to close,
// re-reading after each wake-up. max_wait_ms is capped by
// millrace.fetch.max.wait.ms: a waiting fetch holds a goroutine and request
// budget, and answering before max_wait_ms is always allowed.
//
// Fetch sessions (KIP-227) are kept as Kafka keeps them
// (fetch_sessions.go): an incremental fetch reads every partition of its
// session and answers only those with something new.
//
// With an authorizer, a consumer needs Read on each topic and a replica
// ClusterAction on the cluster (TOPIC_AUTHORIZATION_FAILED otherwise, as
// Kafka answers; see fetchDenied).
//
// Record bytes are not copied: the response carries log slices, written to
// the socket with sendfile (data_stream.go).
//
// Tiered partitions (KIP-405, fetch_remote.go): a consumer's offset below
// the local log start and at or above the remote start is read from remote
// storage on broker/tier's read pool; the Fetch waits for such reads up to
// remote.fetch.max.wait.ms (KIP-1018) and answers partitions whose read is
// not done without records. log_start_offset is then the remote start.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/broker/replication"
)

func init() { regBlockingKey(1, 4, 18, handleFetch) }

func handleFetch(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	fetch := r.body.(*kmsg.FetchRequest)
	session := b.fetchSessions.begin(fetch, fetchSessionOwner{conn: r.conn.id, principal: r.conn.principal}, b.fetchTopicState(r, fetch))
	if session.errorCode != 0 {
		resp := session.request.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = session.errorCode
		return resp, nil
	}
	req := session.request // an incremental fetch reads its whole session

	denied := b.fetchDenied(r, req)
	maxWait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, b.cfg.FetchMaxWait)
	var wake <-chan struct{}
	if maxWait > 0 && req.MinBytes > 0 {
		// Registered before the first read, so an append racing with it
		// still wakes this fetch.
		w := b.replicas.Watch(b.fetchPartitions(req))
		defer b.replicas.Unwatch(w)
		wake = w.Wake()
	}
	var timeout <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timeout = t.C
	}
	expired := maxWait <= 0
	listener := b.listenerOf(r)
	// Remote reads (fetch_remote.go) are waited for, whatever max_wait_ms
	// and min_bytes say, until remoteTimeout: remote.fetch.max.wait.ms from
	// the first pass that started one.
	remote := b.newRemoteFetches()
	var remoteTimer *time.Timer
	defer func() {
		if remoteTimer != nil {
			remoteTimer.Stop()
		}
	}()
	var remoteTimeout <-chan time.Time
	remoteExpired, closing := false, false
	for {
		f, bytes, answerNow := b.fetchOnce(req, denied, session, listener, remote)
		waiting := remote.pending() > 0 && !remoteExpired
		if closing || answerNow || !waiting && (expired || bytes >= int64(req.MinBytes)) {
			b.metrics.fetchedFromReplica(f)
			return session.finish(f), nil
		}
		if waiting && remoteTimer == nil {
			remoteTimer = time.NewTimer(remote.pool.MaxWait())
			remoteTimeout = remoteTimer.C
		}
		f.releaseRecords()
		select {
		case <-wake:
		case <-remote.completed():
		case <-timeout:
			expired = true
		case <-remoteTimeout:
			remoteExpired = true
		case <-ctx.Done():
			// Closing: answer with what there is; the connection drops
			// the answer anyway.
			closing = true
		}
	}
}

// fetchDenial is what a fetch may not read: every partition (all) or the
// topics in topics.
type fetchDenial struct {
	all    bool
	topics map[string]bool
}

func (d fetchDenial) has(topic string) bool { return d.all || d.topics[topic] }

// fetchDenied authorizes a fetch as Kafka does: a replica fetch (replica
// ID >= 0) needs ClusterAction on the cluster, or every partition fails
// with TOPIC_AUTHORIZATION_FAILED before anything is read or any follower
// state (ISR, high watermark) moves — without it any client could claim
// to be a follower and advance the high watermark. A consumer fetch needs
// Read on each topic.
func (b *Broker) fetchDenied(r *request, req *kmsg.FetchRequest) fetchDenial {
	if isFollowerFetch(req) {
		return fetchDenial{all: !b.authorizedCluster(r, acl.ClusterAction)}
	}
	var d fetchDenial
	for _, rt := range req.Topics {
		if name, ok := b.fetchTopicName(req, rt); ok && !d.topics[name] && !b.authorized(r, acl.Topic, name, acl.Read) {
			if d.topics == nil {
				d.topics = map[string]bool{}
			}
			d.topics[name] = true
		}
	}
	return d
}

// fetchTopicState tells the fetch sessions what r's principal sees of a
// topic (fetch_session_bounds.go): -1 when the fetch may not read it (as
// fetchDenied decides), 0 when it does not exist, else its partition count.
func (b *Broker) fetchTopicState(r *request, req *kmsg.FetchRequest) fetchTopicState {
	follower := isFollowerFetch(req)
	return func(key sessionKey) int32 {
		var t *cluster.Topic
		var known bool
		if key.topicID != ([16]byte{}) {
			t, known = b.cluster.TopicByID(key.topicID)
		} else {
			t, known = b.cluster.Topic(key.topic)
		}
		name := key.topic
		if known {
			name = t.Name
		}
		if follower && !b.authorizedCluster(r, acl.ClusterAction) || !follower && !b.authorized(r, acl.Topic, name, acl.Read) {
			return -1
		}
		if !known {
			return 0
		}
		return int32(len(t.Partitions))
	}
}

// fetchPartitions lists the partitions a fetch reads, for the waiters.
func (b *Broker) fetchPartitions(req *kmsg.FetchRequest) []log.TopicPartition {
	var out []log.TopicPartition
	for _, rt := range req.Topics {
		name, ok := b.fetchTopicName(req, rt)
		if !ok {
			continue
		}
		for _, rp := range rt.Partitions {
			out = append(out, log.TopicPartition{Topic: name, Partition: rp.Partition})
		}
	}
	return out
}

// fetchTopicName resolves a request topic to its name (by ID from v13).
func (b *Broker) fetchTopicName(req *kmsg.FetchRequest, rt kmsg.FetchRequestTopic) (string, bool) {
	if req.Version < 13 {
		return rt.Topic, true
	}
	t, ok := b.cluster.TopicByID(rt.TopicID)
	if !ok {
		return "", false
	}
	return t.Name, true
}

// isFollowerFetch reports whether a fetch comes from a replica.
func isFollowerFetch(req *kmsg.FetchRequest) bool {
	if req.Version >= 15 {
		return req.ReplicaState.ID >= 0
	}
	return req.ReplicaID >= 0
}

// fetchReplicaID is the fetching replica's broker ID.
func fetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// fetchOnce reads every requested partition once. It returns the response,
// the record bytes in it, and whether it is to be sent without waiting for
// more: a partition failed, or was sent to its preferred read replica. An
// incremental fetch's response leaves out the partitions session says have
// nothing new. listener is the one the request came on; remote holds the
// Fetch's remote reads (nil when nothing is tiered).
func (b *Broker) fetchOnce(req *kmsg.FetchRequest, denied fetchDenial, session *fetchContext, listener string, remote *remoteFetches) (f *streamedFetch, bytes int64, answerNow bool) {
	session.startPass()
	remote.startPass()
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0
	f = &streamedFetch{FetchResponse: resp}
	remaining := int64(req.MaxBytes)
	follower := isFollowerFetch(req)
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name, known := b.fetchTopicName(req, rt)
		if !session.incremental() {
			st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{}
			if req.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			var slice *log.Slice
			servedAsFollower := false
			switch {
			case denied.has(name):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known:
				sp.ErrorCode = kerr.UnknownTopicID.Code
			default:
				first := bytes == 0 // nothing returned yet: the first batch is returned whole
				slice, servedAsFollower = b.fetchPartition(req, name, rp, &sp, follower, min(int64(rp.PartitionMaxBytes), remaining), first, listener, remote)
			}
			if sp.ErrorCode != 0 || sp.PreferredReadReplica >= 0 {
				answerNow = true
			}
			// Records read from remote storage come in memory, in sp.
			remoteBytes := int64(len(sp.RecordBatches))
			if !session.keep(&sp, slice != nil || remoteBytes > 0) {
				continue
			}
			bytes += remoteBytes
			remaining -= remoteBytes
			if sp.PreferredReadReplica >= 0 {
				f.redirected++
			}
			if servedAsFollower {
				f.followerReads++
			}
			if slice != nil {
				n := int64(slice.Len())
				bytes += n
				remaining -= n
				if servedAsFollower {
					f.followerBytes += n
				}
				f.records = append(f.records, fetchRecords{topic: len(resp.Topics), partition: len(st.Partitions), slice: slice})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 || !session.incremental() {
			resp.Topics = append(resp.Topics, st)
		}
	}
	return f, bytes, answerNow
}

// fetchPartition reads one partition into sp, returning its records (nil
// for none) and whether this broker read them as a follower (KIP-392).
// limit is the byte budget; when first is set the first batch is returned
// even if it is larger. follower tells a replica's fetch, listener the
// listener the request came on; remote holds the Fetch's remote reads, and
// records read from remote storage are set in sp (fetch_remote.go).
func (b *Broker) fetchPartition(req *kmsg.FetchRequest, topic string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, follower bool, limit int64, first bool, listener string, remote *remoteFetches) (*log.Slice, bool) {
	epoch := int32(replication.NoLeaderEpoch)
	if req.Version >= 9 {
		epoch = rp.CurrentLeaderEpoch
	}
	p, code := b.readablePartition(req, topic, rp.Partition, epoch)
	if code != 0 {
		sp.ErrorCode = code
		if p.State() != nil && p.State().Leader >= 0 && code != kerr.UnknownTopicOrPartition.Code {
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = p.State().Leader, p.State().LeaderEpoch
		}
		return nil, false
	}
	if follower {
		// Below a tiered partition's local log start the follower
		// rebuilds from remote storage (fetch_tiered_replica.go).
		if code, localStart := b.replicaFetchTiered(p, topic, rp.Partition, rp.FetchOffset); code != 0 {
			sp.ErrorCode, sp.LogStartOffset = code, localStart
			return nil, false
		}
		// The fetch offset is the follower's log end offset for the ISR
		// and the high watermark (broker/replication).
		if code := b.replicas.FollowerFetch(topic, rp.Partition, fetchReplicaID(req), rp.FetchOffset, rp.LogStartOffset, epoch); code != 0 {
			sp.ErrorCode = code
			return nil, false
		}
	}
	// The high watermark is read before the last stable offset (which
	// reads it again, maybe higher): an answer never has LSO > HW.
	hw := p.HighWatermark()
	lso := min(p.LastStableOffset(), hw)
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, p.Log().StartOffset()
	if !follower {
		sp.LogStartOffset = b.logStartOffset(topic, rp.Partition, p.Log())
	}
	// A follower out of the ISR of a throttled replica gets no records
	// while leader.replication.throttled.rate is exceeded, and otherwise
	// what the rate has left, a batch at least (replication_throttle.go).
	throttled := follower && b.leaderThrottled(p, rp.Partition, fetchReplicaID(req))
	if throttled {
		left := b.leaderReplication.Available(time.Now())
		if left <= 0 {
			return nil, false
		}
		limit, first = min(limit, left), true
	}
	if !p.Follower() {
		if id := b.preferredReadReplica(req, p, rp.FetchOffset, listener); id >= 0 {
			sp.PreferredReadReplica = id // and no records: read them there
			return nil, false
		}
	}
	bound := hw
	readCommitted := !follower && req.IsolationLevel == 1
	switch {
	case follower:
		bound = p.Log().EndOffset()
	case readCommitted:
		bound = lso
	}
	if limit <= 0 && !first {
		return nil, p.Follower()
	}
	if !follower && b.fetchRemote(remote, p, topic, rp, sp, limit, first, bound, readCommitted) {
		return nil, p.Follower()
	}
	slice, err := p.Read(rp.FetchOffset, int(max(min(limit, int64(maxInt32)), 0)), bound)
	if err != nil {
		code, serverFault := replication.LogErrorCode(err)
		if serverFault {
			b.logger.Error("reading a partition", "topic", topic, "partition", rp.Partition, "err", err)
		}
		sp.ErrorCode = code
		return nil, p.Follower()
	}
	if slice.Len() == 0 || (!first && int64(slice.Len()) > limit) {
		slice.Close()
		return nil, p.Follower()
	}
	if throttled {
		b.leaderReplication.Record(int64(slice.Len()), time.Now())
	}
	if readCommitted {
		aborted, err := p.Log().AbortedTransactions(rp.FetchOffset, slice.NextOffset())
		if err != nil {
			slice.Close()
			b.logger.Error("listing aborted transactions", "topic", topic, "partition", rp.Partition, "err", err)
			sp.ErrorCode = kerr.KafkaStorageError.Code
			return nil, p.Follower()
		}
		for _, a := range aborted {
			sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return slice, p.Follower()
}

const maxInt32 = 1<<31 - 1

// releaseRecords closes the slices of a response that will not be sent.
func (f *streamedFetch) releaseRecords() {
	for _, rec := range f.records {
		rec.slice.Close()
	}
	f.records = nil
}
