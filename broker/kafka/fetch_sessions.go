package kafka

// Fetch sessions (KIP-227, incremental fetch), kept as Kafka's
// FetchSessionCache keeps them.
//
// A Fetch request (v7+) carries a session ID and an epoch:
//   - epoch -1 (FINAL_EPOCH) is a full, sessionless fetch whatever the
//     session ID: the partitions named are read and the answer has session
//     ID 0. A session the ID names is closed. kafka-go's Client.Fetch sends
//     ID -1, epoch -1.
//   - epoch 0 (INITIAL_EPOCH) is a full fetch that asks for a new session:
//     a session the ID names is closed, every partition named is answered,
//     and when the cache has a slot (or can evict, below) the answer carries
//     a new session ID, whose next expected epoch is 1.
//   - epoch > 0 is incremental: the session must exist
//     (FETCH_SESSION_ID_NOT_FOUND) and expect that epoch
//     (INVALID_FETCH_SESSION_EPOCH); from v13 its topics are named by ID as
//     the session's were (FETCH_SESSION_TOPIC_ID_ERROR). The partitions
//     named are added to the session or have their fetch parameters
//     replaced, forgotten_topics_data leaves, and then every partition of
//     the session is read from its cached fetch offset. Only partitions with
//     records, an error, or a high watermark, last stable offset or log
//     start offset other than last answered are in the answer (Kafka
//     compares the other two only; a moved last stable offset is answered
//     too, so a read_committed consumer learns of it); partitions
//     that returned records move to the end of the session's order, so the
//     next fetch reads the others first (Kafka's fairness rule). A session
//     left empty is closed and the request answered sessionless, as is one
//     that would grow past millrace.max.partitions.per.request partitions
//     (the bound on what one session may hold, which Kafka does not have).
//
// The epoch advances when a request is accepted, so a repeated or
// reordered request fails with INVALID_FETCH_SESSION_EPOCH, and the client
// starts over with a full fetch. Sessions are per broker, not per
// connection: a client may continue its session on a new connection.
//
// Eviction (max.incremental.fetch.session.cache.slots,
// min.incremental.fetch.session.eviction.ms): a new session takes a full
// cache's slot from the session least recently used if that one is unused
// for longer than the eviction time; otherwise from the least valuable
// evictable session — consumers' before followers', smaller before larger —
// provided the new one is more valuable (a follower's over a consumer's, or
// more partitions). A follower's session may evict any consumer's, a
// consumer's only sessions created longer than the eviction time ago. Kafka
// judges a session's age when it was last used; here it is judged when a
// slot is wanted, which only makes old sessions evictable sooner.
//
// Replica fetches (replica ID >= 0) use sessions the same way; their
// follower state moves for every session partition read, as in Kafka.
// millrace's own followers fetch one partition per request
// (replication_follower.go), where a session saves nothing, so they send
// sessionless fetches.

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Session epochs with a meaning of their own (KIP-227).
const (
	fetchSessionInitialEpoch int32 = 0  // a full fetch asking for a new session
	fetchSessionFinalEpoch   int32 = -1 // a full fetch without a session
)

// fetchSessionCache holds the broker's fetch sessions.
type fetchSessionCache struct {
	slots       int           // max.incremental.fetch.session.cache.slots
	evictionAge time.Duration // min.incremental.fetch.session.eviction.ms
	maxSize     func() int    // the most partitions one session may hold
	now         func() time.Time

	// Counted for the metrics (metrics.go).
	created      atomic.Int64 // sessions created
	incrementals atomic.Int64 // fetches served from a session
	evictions    atomic.Int64 // sessions evicted for a new one

	mu       sync.Mutex // guards the following
	sessions map[int32]*fetchSession
}

func newFetchSessionCache(slots int, evictionAge time.Duration, maxSize func() int) *fetchSessionCache {
	return &fetchSessionCache{
		slots: slots, evictionAge: evictionAge, maxSize: maxSize, now: time.Now,
		sessions: make(map[int32]*fetchSession),
	}
}

// fetchSession is one client's session.
type fetchSession struct {
	id         int32
	privileged bool // a follower's session: harder to evict
	topicIDs   bool // created by a v13+ request: topics are named by ID
	created    time.Time

	// Read by eviction under the cache's lock without the session's.
	lastUsed atomic.Int64 // unix nanoseconds
	size     atomic.Int32 // len(parts)

	mu    sync.Mutex // guards the following
	epoch int32      // the epoch the next request must carry
	parts []*sessionPartition
	index map[sessionKey]*sessionPartition
	// The buffers of an incremental fetch's request and snapshot, reused
	// by the next fetch once finished (busy meanwhile: a fetch racing
	// with it gets its own), so that a fetch of a large session does not
	// allocate its size again.
	busy    bool
	scratch sessionBuffers
}

// sessionKey names a partition in a session: by topic name before v13, by
// topic ID from v13 (the other field is zero).
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPartition is one partition of a session: what the client last
// asked for it, and what it was last answered.
type sessionPartition struct {
	key  sessionKey
	req  kmsg.FetchRequestTopicPartition
	last sessionAnswer
}

// sessionAnswer is what a partition was answered: -1 offsets until it was
// and after an error, so the partition is answered again once the error
// goes away (Kafka's rule). p names the partition in a fetch's snapshot.
type sessionAnswer struct {
	p                                               *sessionPartition
	highWatermark, lastStableOffset, logStartOffset int64
}

var unanswered = sessionAnswer{highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}

// answer is what sp tells the client.
func answer(sp *kmsg.FetchResponseTopicPartition) sessionAnswer {
	if sp.ErrorCode != 0 {
		return unanswered
	}
	return sessionAnswer{highWatermark: sp.HighWatermark, lastStableOffset: sp.LastStableOffset, logStartOffset: sp.LogStartOffset}
}

// mustAnswer reports whether sp goes in an incremental answer to a client
// last told last: it has records or an error, or offsets that changed.
func mustAnswer(last sessionAnswer, sp *kmsg.FetchResponseTopicPartition, records bool) bool {
	return records || sp.ErrorCode != 0 || sp.HighWatermark != last.highWatermark ||
		sp.LastStableOffset != last.lastStableOffset || sp.LogStartOffset != last.logStartOffset
}

// fetchContext is what a Fetch request is served as.
type fetchContext struct {
	cache *fetchSessionCache
	// errorCode is a top-level error: the request is answered with it and
	// nothing else.
	errorCode int16
	// request is what to read: the client's request, or for an
	// incremental fetch one naming every partition of the session.
	request *kmsg.FetchRequest
	// newSession asks finish to create a session (an epoch-0 full fetch).
	newSession bool
	// session is an incremental fetch's session; snapshot is what each
	// partition request names was last answered, in request order.
	session  *fetchSession
	snapshot []sessionAnswer
	scratch  bool // the request and snapshot are the session's buffers

	// One pass of fetchOnce over the request (a long poll makes several;
	// the last is answered): the next partition, and those answered.
	next int
	kept []keptPartition
}

// keptPartition is a partition in an incremental answer.
type keptPartition struct {
	answer  sessionAnswer
	records bool
}

// begin decides how req is served and, for an incremental fetch, applies
// its partition changes to the session.
func (c *fetchSessionCache) begin(req *kmsg.FetchRequest) *fetchContext {
	fc := &fetchContext{cache: c, request: req}
	if req.Version < 7 {
		return fc // no session fields: always full
	}
	if req.SessionEpoch == fetchSessionInitialEpoch || req.SessionEpoch == fetchSessionFinalEpoch {
		if req.SessionID != 0 {
			c.remove(req.SessionID) // a full fetch closes the session it names
		}
		fc.newSession = req.SessionEpoch == fetchSessionInitialEpoch && c.slots > 0
		return fc
	}
	c.mu.Lock()
	s := c.sessions[req.SessionID]
	c.mu.Unlock()
	if s == nil {
		fc.errorCode = kerr.FetchSessionIDNotFound.Code
		return fc
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case req.SessionEpoch != s.epoch:
		fc.errorCode = kerr.InvalidFetchSessionEpoch.Code
		return fc
	case s.topicIDs != (req.Version >= 13):
		fc.errorCode = kerr.FetchSessionTopicIDError.Code
		return fc
	}
	s.updateLocked(req, true)
	if len(s.parts) == 0 || len(s.parts) > c.maxSize() {
		c.remove(s.id)
		return fc
	}
	s.epoch = nextFetchSessionEpoch(s.epoch)
	s.lastUsed.Store(c.now().UnixNano())
	c.incrementals.Add(1)
	fc.session = s
	var buffers sessionBuffers
	if !s.busy {
		s.busy, fc.scratch = true, true
		buffers = s.scratch
	}
	fc.request, buffers = s.requestLocked(req, buffers)
	fc.snapshot = buffers.answers
	if fc.scratch {
		s.scratch = buffers
	}
	return fc
}

// nextFetchSessionEpoch is the epoch after epoch, wrapping to 1 (0 and -1
// have their own meanings).
func nextFetchSessionEpoch(epoch int32) int32 {
	if epoch == maxInt32 {
		return 1
	}
	return epoch + 1
}

// updateLocked adds or updates the partitions req names, then, when
// forget is set, drops the forgotten ones (a partition both named and
// forgotten ends up forgotten, as in Kafka).
func (s *fetchSession) updateLocked(req *kmsg.FetchRequest, forget bool) {
	byID := req.Version >= 13
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			key := newSessionKey(byID, rt.Topic, rt.TopicID, rp.Partition)
			if p := s.index[key]; p != nil {
				p.req = rp
				continue
			}
			// The session outlives the request: its topic name must not
			// alias the request's frame.
			key.topic = strings.Clone(key.topic)
			p := &sessionPartition{key: key, req: rp, last: unanswered}
			s.index[key] = p
			s.parts = append(s.parts, p)
		}
	}
	forgotten := 0
	for _, ft := range req.ForgottenTopics {
		if !forget {
			break
		}
		for _, partition := range ft.Partitions {
			key := newSessionKey(byID, ft.Topic, ft.TopicID, partition)
			if _, ok := s.index[key]; ok {
				delete(s.index, key)
				forgotten++
			}
		}
	}
	if forgotten > 0 {
		kept := s.parts[:0]
		for _, p := range s.parts {
			if s.index[p.key] == p {
				kept = append(kept, p)
			}
		}
		clear(s.parts[len(kept):])
		s.parts = kept
	}
	s.size.Store(int32(len(s.parts)))
}

func newSessionKey(byID bool, topic string, topicID [16]byte, partition int32) sessionKey {
	if byID {
		return sessionKey{topicID: topicID, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

// sessionBuffers hold an incremental fetch's request and snapshot.
type sessionBuffers struct {
	topics  []kmsg.FetchRequestTopic
	reqs    []kmsg.FetchRequestTopicPartition
	answers []sessionAnswer
}

// requestLocked is req naming every partition of the session, in order,
// instead of its own partitions (consecutive partitions of a topic share a
// topic entry), built in buf, whose answers become the snapshot of what
// each partition was last answered.
func (s *fetchSession) requestLocked(req *kmsg.FetchRequest, buf sessionBuffers) (*kmsg.FetchRequest, sessionBuffers) {
	out := *req
	out.ForgottenTopics = nil
	buf.topics, buf.reqs, buf.answers = buf.topics[:0], buf.reqs[:0], buf.answers[:0]
	if cap(buf.reqs) < len(s.parts) {
		// Sized once: the topics' partition lists are slices of it.
		buf.reqs = make([]kmsg.FetchRequestTopicPartition, 0, len(s.parts))
		buf.answers = make([]sessionAnswer, 0, len(s.parts))
	}
	start := 0
	for i, p := range s.parts {
		buf.reqs = append(buf.reqs, p.req)
		answer := p.last
		answer.p = p
		buf.answers = append(buf.answers, answer)
		if i+1 == len(s.parts) || s.parts[i+1].key.topic != p.key.topic || s.parts[i+1].key.topicID != p.key.topicID {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.key.topic, p.key.topicID
			t.Partitions = buf.reqs[start : i+1 : i+1]
			buf.topics = append(buf.topics, t)
			start = i + 1
		}
	}
	out.Topics = buf.topics
	return &out, buf
}

// incremental reports whether fc answers only what changed.
func (fc *fetchContext) incremental() bool { return fc.session != nil }

// startPass begins a read of every partition of fc.request.
func (fc *fetchContext) startPass() {
	fc.next = 0
	fc.kept = fc.kept[:0]
}

// keep reports whether the next partition's answer sp, with records or
// not, goes in the response: always, unless the fetch is incremental and
// nothing changed for the client.
func (fc *fetchContext) keep(sp *kmsg.FetchResponseTopicPartition, records bool) bool {
	if fc.session == nil {
		return true
	}
	last := fc.snapshot[fc.next]
	fc.next++
	if !mustAnswer(last, sp, records) {
		return false
	}
	a := answer(sp)
	a.p = last.p
	fc.kept = append(fc.kept, keptPartition{answer: a, records: records})
	return true
}

// finish sets the response's session ID and records, for a session, what
// was answered. f is the response to fc.request from the last pass.
func (fc *fetchContext) finish(f *streamedFetch) *streamedFetch {
	f.SessionID = 0
	switch {
	case fc.newSession:
		f.SessionID = fc.cache.create(fc.request, f.FetchResponse)
	case fc.session != nil:
		fc.session.answered(fc.kept, fc.scratch)
		f.SessionID = fc.session.id
	}
	return f
}

// answered records the partitions of an incremental answer and releases
// the session's buffers if the fetch held them.
func (s *fetchSession) answered(kept []keptPartition, scratch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if scratch {
		s.busy = false
	}
	var moved map[*sessionPartition]bool
	for _, k := range kept {
		p := k.answer.p
		p.last = k.answer
		p.last.p = nil
		if k.records {
			if moved == nil {
				moved = make(map[*sessionPartition]bool)
			}
			moved[p] = true
		}
	}
	if len(moved) == 0 {
		return
	}
	// Partitions that returned records go last, so the next fetch's byte
	// budget goes to the others first.
	order := s.parts[:0:0]
	if len(s.parts) > 0 {
		order = make([]*sessionPartition, 0, len(s.parts))
	}
	var last []*sessionPartition
	for _, p := range s.parts {
		if moved[p] {
			last = append(last, p)
		} else {
			order = append(order, p)
		}
	}
	s.parts = append(order, last...)
}

// create makes a session of the partitions of req, a full fetch answered
// by resp, and returns its ID, or 0 when the cache has no slot for it.
func (c *fetchSessionCache) create(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) int32 {
	s := &fetchSession{
		privileged: isFollowerFetch(req),
		topicIDs:   req.Version >= 13,
		created:    c.now(),
		epoch:      nextFetchSessionEpoch(fetchSessionInitialEpoch),
		index:      make(map[sessionKey]*sessionPartition),
	}
	s.lastUsed.Store(s.created.UnixNano())
	s.updateLocked(req, false) // not shared yet: no lock needed; a full fetch forgets nothing
	if len(s.parts) > c.maxSize() {
		return 0
	}
	// The response lists the request's partitions in order; record what
	// was answered (a partition named twice keeps its last answer).
	for ti, rt := range req.Topics {
		for pi, rp := range rt.Partitions {
			if ti >= len(resp.Topics) || pi >= len(resp.Topics[ti].Partitions) {
				continue
			}
			p := s.index[newSessionKey(s.topicIDs, rt.Topic, rt.TopicID, rp.Partition)]
			p.last = answer(&resp.Topics[ti].Partitions[pi])
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.slots && !c.evictLocked(s) {
		return 0
	}
	for s.id == 0 || s.id == -1 || c.sessions[s.id] != nil {
		s.id = rand.Int32()
	}
	c.sessions[s.id] = s
	c.created.Add(1)
	return s.id
}

// evictLocked frees a slot for the new session s if Kafka's rules allow,
// reporting whether it did.
func (c *fetchSessionCache) evictLocked(s *fetchSession) bool {
	now := c.now()
	var stalest, victim *fetchSession
	for _, o := range c.sessions {
		if stalest == nil || o.lastUsed.Load() < stalest.lastUsed.Load() {
			stalest = o
		}
		old := now.Sub(o.created) > c.evictionAge
		if !old && (!s.privileged || o.privileged) {
			continue // not evictable by s
		}
		if victim == nil || lessValuable(o, victim) {
			victim = o
		}
	}
	if stalest == nil {
		return false
	}
	if now.Sub(time.Unix(0, stalest.lastUsed.Load())) > c.evictionAge {
		delete(c.sessions, stalest.id)
		c.evictions.Add(1)
		return true
	}
	// s has no ID yet (0, below every session's), so a session of equal
	// privilege and size is not evicted for it.
	if victim == nil || !lessValuable(victim, s) {
		return false
	}
	delete(c.sessions, victim.id)
	c.evictions.Add(1)
	return true
}

// lessValuable orders sessions for eviction as Kafka's EvictableKey:
// consumers' before followers', then smaller first, then by ID.
func lessValuable(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if as, bs := a.size.Load(), b.size.Load(); as != bs {
		return as < bs
	}
	return a.id < b.id
}

// remove closes session id, if there is one.
func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// fetchSessionMetrics are the cache's metrics, after Kafka's
// NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
// IncrementalFetchSessionEvictionsPerSec, read when scraped (the cache is
// opened after the metrics are registered).
func fetchSessionMetrics(b *Broker) []prometheus.Collector {
	counter := func(name, help string, n func(c *fetchSessionCache) *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			if b.fetchSessions == nil {
				return 0
			}
			return float64(n(b.fetchSessions).Load())
		})
	}
	gauge := func(name, help string, partitions bool) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if b.fetchSessions == nil {
				return 0
			}
			sessions, parts := b.fetchSessions.stats()
			if partitions {
				return float64(parts)
			}
			return float64(sessions)
		})
	}
	return []prometheus.Collector{
		gauge("millrace_broker_fetch_sessions", "Fetch sessions (KIP-227) held; max.incremental.fetch.session.cache.slots bounds them.", false),
		gauge("millrace_broker_fetch_session_partitions", "Partitions held by all fetch sessions.", true),
		counter("millrace_broker_fetch_sessions_created_total", "Fetch sessions created.", func(c *fetchSessionCache) *atomic.Int64 { return &c.created }),
		counter("millrace_broker_incremental_fetches_total", "Fetch requests served from a fetch session (incremental fetches).", func(c *fetchSessionCache) *atomic.Int64 { return &c.incrementals }),
		counter("millrace_broker_fetch_session_evictions_total", "Fetch sessions evicted to make room for a new one.", func(c *fetchSessionCache) *atomic.Int64 { return &c.evictions }),
	}
}

// stats returns the number of sessions and of partitions they hold.
func (c *fetchSessionCache) stats() (sessions, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		partitions += int(s.size.Load())
	}
	return len(c.sessions), partitions
}
