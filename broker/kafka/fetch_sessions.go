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
// A partition answered UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID or
// TOPIC_AUTHORIZATION_FAILED is not cached: it gets its error and is not
// part of the session (Kafka caches it; a client could otherwise make the
// broker hold any number of partitions that do not exist or that it may
// not read). A session without a partition is not made. Since the client
// believes the partition is in its session, the session remembers the
// topic (at most maxExcludedTopics of them, or no session) with what the
// principal saw of it: no permission, no topic, or its partition count;
// once that changes (the topic is created, grows, or becomes readable) the
// next incremental fetch closes the session and is answered without one,
// so the client starts over with a full fetch that names the partition
// again.
//
// The cache's bounds beyond Kafka's slots (sessions per connection and per
// principal, and a byte budget) are in fetch_session_bounds.go.
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
// millrace's own followers (broker/interbroker/fetcher.go) send
// sessionless fetches: each fetcher's partition set changes as leaderships
// move, and a full fetch of the few partitions one leader serves costs
// little.

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
	limits fetchSessionLimits
	now    func() time.Time

	// Counted for the metrics (metrics.go).
	created      atomic.Int64 // sessions created
	incrementals atomic.Int64 // fetches served from a session
	evictions    atomic.Int64 // sessions evicted for a new one

	mu          sync.Mutex // guards the following
	sessions    map[int32]*fetchSession
	bytes       int64          // the sessions' cost, against limits.maxBytes
	byConn      map[uint64]int // sessions per opening connection
	byPrincipal map[string]int // sessions per principal
}

func newFetchSessionCache(limits fetchSessionLimits) *fetchSessionCache {
	return &fetchSessionCache{
		limits: limits, now: time.Now,
		sessions:    make(map[int32]*fetchSession),
		byConn:      make(map[uint64]int),
		byPrincipal: make(map[string]int),
	}
}

// fetchSession is one client's session.
type fetchSession struct {
	id         int32
	owner      fetchSessionOwner
	privileged bool // a follower's session: harder to evict
	topicIDs   bool // created by a v13+ request: topics are named by ID
	created    time.Time
	cost       int64 // what it holds as the cache counts it; guarded by the cache's mu

	// Read by eviction under the cache's lock without the session's.
	lastUsed atomic.Int64 // unix nanoseconds
	size     atomic.Int32 // len(parts)

	mu    sync.Mutex // guards the following
	epoch int32      // the epoch the next request must carry
	parts []*sessionPartition
	index map[sessionKey]*sessionPartition
	// names interns the topic names of parts (one copy per topic, not per
	// partition); nameBytes is their length.
	names     map[string]string
	nameBytes int
	// excluded are the topics of partitions not cached (above).
	excluded []excludedTopic
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
// last told last: it has records or an error, names a preferred read
// replica (KIP-392: the client must hear it), or offsets that changed.
func mustAnswer(last sessionAnswer, sp *kmsg.FetchResponseTopicPartition, records bool) bool {
	return records || sp.ErrorCode != 0 || sp.PreferredReadReplica >= 0 || sp.HighWatermark != last.highWatermark ||
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

	// owner sent the request; topics tells what it sees of a topic.
	owner  fetchSessionOwner
	topics fetchTopicState

	// One pass of fetchOnce over the request (a long poll makes several;
	// the last is answered): the next partition, and those answered.
	next int
	kept []keptPartition
}

// keptPartition is a partition in an incremental answer.
type keptPartition struct {
	answer  sessionAnswer
	records bool
	drop    bool // answered with an error that leaves it out of the session
}

// uncached reports whether a partition answered code is left out of a
// session: it does not exist, or the principal may not read it.
func uncached(code int16) bool {
	return code == kerr.UnknownTopicOrPartition.Code || code == kerr.UnknownTopicID.Code || code == kerr.TopicAuthorizationFailed.Code
}

// begin decides how req, sent by owner, is served and, for an
// incremental fetch, applies its partition changes to the session. topics
// tells what owner sees of a topic.
func (c *fetchSessionCache) begin(req *kmsg.FetchRequest, owner fetchSessionOwner, topics fetchTopicState) *fetchContext {
	fc := &fetchContext{cache: c, request: req, owner: owner, topics: topics}
	if req.Version < 7 {
		return fc // no session fields: always full
	}
	if req.SessionEpoch == fetchSessionInitialEpoch || req.SessionEpoch == fetchSessionFinalEpoch {
		if req.SessionID != 0 {
			c.remove(req.SessionID) // a full fetch closes the session it names
		}
		fc.newSession = req.SessionEpoch == fetchSessionInitialEpoch && c.limits.slots > 0
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
	if s.excludedChangedLocked(topics) {
		c.close(s) // the client starts over and names those partitions again
		return fc
	}
	s.updateLocked(req)
	if len(s.parts) == 0 || len(s.parts) > c.limits.maxSize() {
		c.close(s)
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

// updateLocked adds or updates the partitions req names, then drops the
// forgotten ones (a partition both named and forgotten ends up forgotten,
// as in Kafka).
func (s *fetchSession) updateLocked(req *kmsg.FetchRequest) {
	byID := req.Version >= 13
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			s.putLocked(newSessionKey(byID, rt.Topic, rt.TopicID, rp.Partition), rp)
		}
	}
	var forgotten map[*sessionPartition]bool
	for _, ft := range req.ForgottenTopics {
		for _, partition := range ft.Partitions {
			if p := s.index[newSessionKey(byID, ft.Topic, ft.TopicID, partition)]; p != nil {
				if forgotten == nil {
					forgotten = make(map[*sessionPartition]bool)
				}
				forgotten[p] = true
			}
		}
	}
	if forgotten != nil {
		s.removeLocked(func(p *sessionPartition) bool { return forgotten[p] })
	}
}

// putLocked adds the partition key names, asked for as rp, or replaces
// its fetch parameters, and returns it.
func (s *fetchSession) putLocked(key sessionKey, rp kmsg.FetchRequestTopicPartition) *sessionPartition {
	if p := s.index[key]; p != nil {
		p.req = rp
		return p
	}
	// The session outlives the request: its topic name must not alias
	// the request's frame, and one copy serves every partition.
	name, ok := s.names[key.topic]
	if !ok {
		name = strings.Clone(key.topic)
		s.names[name] = name
		s.nameBytes += len(name)
	}
	key.topic = name
	p := &sessionPartition{key: key, req: rp, last: unanswered}
	s.index[key] = p
	s.parts = append(s.parts, p)
	s.size.Store(int32(len(s.parts)))
	return p
}

// removeLocked removes the partitions gone reports, and the names no
// partition uses any more.
func (s *fetchSession) removeLocked(gone func(*sessionPartition) bool) {
	kept := s.parts[:0]
	for _, p := range s.parts {
		if gone(p) {
			delete(s.index, p.key)
		} else {
			kept = append(kept, p)
		}
	}
	clear(s.parts[len(kept):])
	s.parts = kept
	s.size.Store(int32(len(s.parts)))
	clear(s.names)
	s.nameBytes = 0
	for _, p := range s.parts {
		if _, ok := s.names[p.key.topic]; !ok {
			s.names[p.key.topic] = p.key.topic
			s.nameBytes += len(p.key.topic)
		}
	}
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
	fc.kept = append(fc.kept, keptPartition{answer: a, records: records, drop: uncached(sp.ErrorCode)})
	return true
}

// finish sets the response's session ID and records, for a session, what
// was answered. f is the response to fc.request from the last pass.
func (fc *fetchContext) finish(f *streamedFetch) *streamedFetch {
	f.SessionID = 0
	switch {
	case fc.newSession:
		f.SessionID = fc.cache.create(fc.request, f.FetchResponse, fc.owner, fc.topics)
	case fc.session != nil:
		if fc.cache.answered(fc.session, fc.kept, fc.scratch, fc.topics) {
			f.SessionID = fc.session.id
		}
	}
	return f
}

// answered records the partitions of an incremental answer of s, leaves
// out of it those whose error keeps them out of sessions, and releases the
// session's buffers if the fetch held them. It reports whether s lives on:
// a session left empty, with too many excluded topics or over the byte
// budget is closed, and the answer goes without it.
func (c *fetchSessionCache) answered(s *fetchSession, kept []keptPartition, scratch bool, topics fetchTopicState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if scratch {
		s.busy = false
	}
	var dropped map[*sessionPartition]bool
	keep := true
	for _, k := range kept {
		p := k.answer.p
		if k.drop {
			if dropped == nil {
				dropped = make(map[*sessionPartition]bool)
			}
			dropped[p] = true
			keep = keep && s.excludeLocked(p.key, topics)
		}
	}
	if len(dropped) > 0 {
		s.removeLocked(func(p *sessionPartition) bool { return dropped[p] })
	}
	// The session's size is judged against the budget only now, after
	// what it may not hold left: partitions the request named that do
	// not exist must not evict other sessions.
	if !keep || len(s.parts) == 0 || !c.resize(s, s.costLocked()) {
		c.close(s)
		return false
	}
	s.recordLocked(kept, dropped)
	return true
}

// recordLocked records what the partitions of kept were answered, leaving
// out dropped ones, and moves those that returned records to the end.
func (s *fetchSession) recordLocked(kept []keptPartition, dropped map[*sessionPartition]bool) {
	var moved map[*sessionPartition]bool
	for _, k := range kept {
		p := k.answer.p
		if dropped[p] {
			continue
		}
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

// create makes a session of the partitions of req, a full fetch by owner
// answered by resp, and returns its ID, or 0 when it gets none: nothing to
// cache, too large, or no room.
func (c *fetchSessionCache) create(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, owner fetchSessionOwner, topics fetchTopicState) int32 {
	s := &fetchSession{
		owner:      owner,
		privileged: isFollowerFetch(req),
		topicIDs:   req.Version >= 13,
		created:    c.now(),
		epoch:      nextFetchSessionEpoch(fetchSessionInitialEpoch),
		index:      make(map[sessionKey]*sessionPartition),
		names:      make(map[string]string),
	}
	s.lastUsed.Store(s.created.UnixNano())
	// Not shared yet: no lock needed. The response lists the request's
	// partitions in order; record what was answered (a partition named
	// twice keeps its last answer).
	maxSize := c.limits.maxSize()
	for ti, rt := range req.Topics {
		for pi, rp := range rt.Partitions {
			key := newSessionKey(s.topicIDs, rt.Topic, rt.TopicID, rp.Partition)
			var sp *kmsg.FetchResponseTopicPartition
			if ti < len(resp.Topics) && pi < len(resp.Topics[ti].Partitions) {
				sp = &resp.Topics[ti].Partitions[pi]
			}
			if sp != nil && uncached(sp.ErrorCode) {
				if !s.excludeLocked(key, topics) {
					return 0
				}
				continue
			}
			p := s.putLocked(key, rp)
			if sp != nil {
				p.last = answer(sp)
			}
			if len(s.parts) > maxSize {
				return 0
			}
		}
	}
	if len(s.parts) == 0 {
		return 0
	}
	s.cost = s.costLocked()

	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.admitLocked(s) {
		return 0
	}
	for s.id == 0 || s.id == -1 || c.sessions[s.id] != nil {
		s.id = rand.Int32()
	}
	c.addLocked(s)
	c.created.Add(1)
	return s.id
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

// close removes s, unless it is gone already (its ID may be another
// session's by then).
func (c *fetchSessionCache) close(s *fetchSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[s.id] == s {
		c.removeLocked(s)
	}
}

// remove closes session id, if there is one.
func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		c.removeLocked(s)
	}
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
	gauge := func(name, help string, value func(sessions, partitions int, bytes int64) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if b.fetchSessions == nil {
				return 0
			}
			sessions, parts := b.fetchSessions.stats()
			return float64(value(sessions, parts, b.fetchSessions.heldBytes()))
		})
	}
	return []prometheus.Collector{
		gauge("millrace_broker_fetch_sessions", "Fetch sessions (KIP-227) held; max.incremental.fetch.session.cache.slots bounds them.",
			func(sessions, _ int, _ int64) int64 { return int64(sessions) }),
		gauge("millrace_broker_fetch_session_partitions", "Partitions held by all fetch sessions.",
			func(_, partitions int, _ int64) int64 { return int64(partitions) }),
		gauge("millrace_broker_fetch_session_bytes", "Memory the fetch sessions hold as the cache counts it; millrace.fetch.session.cache.max.bytes bounds it.",
			func(_, _ int, bytes int64) int64 { return bytes }),
		counter("millrace_broker_fetch_sessions_created_total", "Fetch sessions created.", func(c *fetchSessionCache) *atomic.Int64 { return &c.created }),
		counter("millrace_broker_incremental_fetches_total", "Fetch requests served from a fetch session (incremental fetches).", func(c *fetchSessionCache) *atomic.Int64 { return &c.incrementals }),
		counter("millrace_broker_fetch_session_evictions_total", "Fetch sessions evicted to make room for a new one.", func(c *fetchSessionCache) *atomic.Int64 { return &c.evictions }),
	}
}

// heldBytes is what the sessions hold, as the cache counts it.
func (c *fetchSessionCache) heldBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
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
