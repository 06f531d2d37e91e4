package kafka

// The bounds of the fetch session cache (fetch_sessions.go) beyond Kafka's
// max.incremental.fetch.session.cache.slots, so that no client can make
// the broker hold more than a budget of sessions:
//
//   - millrace.fetch.sessions.per.connection: a connection at its bound
//     that opens a session gives up its own least recently used one (a
//     client keeps one session per broker; a connection that opens more
//     has moved on from its older ones).
//   - millrace.fetch.sessions.per.principal: a principal at its bound gets
//     a session only by evicting one of its own under Kafka's rules below.
//   - millrace.fetch.session.cache.max.bytes: the sessions' cost, counted
//     as fetchSessionBytes per session, fetchSessionPartitionBytes per
//     partition and fetchSessionTopicBytes plus the name per topic
//     (TestFetchSessionCostAccounting measures them). A new session evicts
//     under Kafka's rules until it fits, or gets none; a session that
//     grows past the budget evicts likewise or is closed.
//
// Kafka's rules (evictForLocked): a session unused for
// min.incremental.fetch.session.eviction.ms may always go; otherwise the
// least valuable one the new session may evict (consumers' before
// followers', smaller before larger; a follower's session evicts any
// consumer's, a consumer's only those created longer than the eviction
// time ago) goes if the new one is more valuable.

import (
	"strings"
	"time"
)

// What the cache counts a session as holding, in bytes of heap, checked by
// TestFetchSessionCostAccounting on 64-bit Go, which measured 365 bytes a
// partition for sessions of 1,000 partitions of one topic and 574 for
// sessions of 1,000 topics of one partition (50-byte names). A partition
// is its sessionPartition (key, request and last answer: 144 bytes
// allocated), its index entry in a Go map at its load factor, its pointer
// in the partition order (up to twice that after append's doubling), and
// its place in the incremental fetch's reused request and snapshot, which
// only a session that served an incremental fetch has. The partition's
// topic name is held once per session.
const (
	fetchSessionBytes          = 1024 // the session itself, its maps and slices when small
	fetchSessionPartitionBytes = 400
	fetchSessionTopicBytes     = 160 // an interned name's map entry, its allocation's rounding, and its topic in the reused request
	excludedTopicBytes         = 48
)

// maxExcludedTopics bounds the topics a session remembers having left
// out (fetch_sessions.go); a fetch that leaves out more gets no session.
const maxExcludedTopics = 8

// maxTopicNameBytes is the longest topic name Kafka allows: a longer name
// can never exist, so a session need not watch for it.
const maxTopicNameBytes = 249

// fetchSessionLimits configure the cache.
type fetchSessionLimits struct {
	slots         int           // max.incremental.fetch.session.cache.slots
	evictionAge   time.Duration // min.incremental.fetch.session.eviction.ms
	maxSize       func() int    // the most partitions one session may hold
	perConnection int           // millrace.fetch.sessions.per.connection
	perPrincipal  int           // millrace.fetch.sessions.per.principal
	maxBytes      int64         // millrace.fetch.session.cache.max.bytes
}

// fetchSessionOwner is who opened a session: the connection and its
// principal.
type fetchSessionOwner struct {
	conn      uint64
	principal string
}

// fetchTopicState is what a fetch's principal sees of the topic key
// names: -1 may not read it, 0 it does not exist, else its partition
// count.
type fetchTopicState func(key sessionKey) int32

// excludedTopic is a topic some partitions of which a session left out,
// and what the principal saw of it then.
type excludedTopic struct {
	topic   string
	topicID [16]byte
	state   int32
}

// excludeLocked remembers that a partition of key's topic was left out,
// with what the principal sees of the topic (asked of topics once per
// topic); false when the session remembers maxExcludedTopics already.
func (s *fetchSession) excludeLocked(key sessionKey, topics fetchTopicState) bool {
	if len(key.topic) > maxTopicNameBytes {
		return true // can never exist: nothing to watch for
	}
	for _, e := range s.excluded {
		if e.topic == key.topic && e.topicID == key.topicID {
			return true
		}
	}
	if len(s.excluded) == maxExcludedTopics {
		return false
	}
	s.excluded = append(s.excluded, excludedTopic{topic: strings.Clone(key.topic), topicID: key.topicID, state: topics(key)})
	return true
}

// excludedChangedLocked reports whether a topic the session left out
// changed for the principal since.
func (s *fetchSession) excludedChangedLocked(topics fetchTopicState) bool {
	for _, e := range s.excluded {
		if topics(sessionKey{topic: e.topic, topicID: e.topicID}) != e.state {
			return true
		}
	}
	return false
}

// costLocked is what the cache counts s as holding.
func (s *fetchSession) costLocked() int64 {
	n := int64(fetchSessionBytes) + int64(len(s.parts))*fetchSessionPartitionBytes +
		int64(len(s.names))*fetchSessionTopicBytes + int64(s.nameBytes)
	for _, e := range s.excluded {
		n += excludedTopicBytes + int64(len(e.topic))
	}
	return n
}

// admitLocked makes room for the new session s within the bounds,
// reporting whether there is.
func (c *fetchSessionCache) admitLocked(s *fetchSession) bool {
	if s.cost > c.limits.maxBytes {
		return false
	}
	if c.byConn[s.owner.conn] >= c.limits.perConnection {
		var lru *fetchSession
		for _, o := range c.sessions {
			if o.owner.conn == s.owner.conn && (lru == nil || o.lastUsed.Load() < lru.lastUsed.Load()) {
				lru = o
			}
		}
		c.evictedLocked(lru)
	}
	if c.byPrincipal[s.owner.principal] >= c.limits.perPrincipal &&
		!c.evictForLocked(s, func(o *fetchSession) bool { return o.owner.principal == s.owner.principal }) {
		return false
	}
	if len(c.sessions) >= c.limits.slots && !c.evictForLocked(s, nil) {
		return false
	}
	for c.bytes+s.cost > c.limits.maxBytes {
		if !c.evictForLocked(s, nil) {
			return false
		}
	}
	return true
}

// resize sets the cost of s, in the cache, to cost, evicting others as
// Kafka's rules allow while the cache is over its budget; false when s
// was removed meanwhile or the budget cannot be kept (the caller closes
// s).
func (c *fetchSessionCache) resize(s *fetchSession, cost int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[s.id] != s {
		return false
	}
	c.bytes += cost - s.cost
	s.cost = cost
	for c.bytes > c.limits.maxBytes {
		if !c.evictForLocked(s, func(o *fetchSession) bool { return o != s }) {
			return false
		}
	}
	return true
}

// evictForLocked evicts, for the session s, one session of those
// candidate accepts (nil: any) if Kafka's rules allow, reporting whether
// it did.
func (c *fetchSessionCache) evictForLocked(s *fetchSession, candidate func(*fetchSession) bool) bool {
	now := c.now()
	var stalest, victim *fetchSession
	for _, o := range c.sessions {
		if candidate != nil && !candidate(o) {
			continue
		}
		if stalest == nil || o.lastUsed.Load() < stalest.lastUsed.Load() {
			stalest = o
		}
		old := now.Sub(o.created) > c.limits.evictionAge
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
	if now.Sub(time.Unix(0, stalest.lastUsed.Load())) > c.limits.evictionAge {
		c.evictedLocked(stalest)
		return true
	}
	// A new s has no ID yet (0, below every session's), so a session of
	// equal privilege and size is not evicted for it.
	if victim == nil || !lessValuable(victim, s) {
		return false
	}
	c.evictedLocked(victim)
	return true
}

// evictedLocked removes s, if not nil, as an eviction.
func (c *fetchSessionCache) evictedLocked(s *fetchSession) {
	if s != nil {
		c.removeLocked(s)
		c.evictions.Add(1)
	}
}

// addLocked puts s, whose ID is set, in the cache.
func (c *fetchSessionCache) addLocked(s *fetchSession) {
	c.sessions[s.id] = s
	c.bytes += s.cost
	c.byConn[s.owner.conn]++
	c.byPrincipal[s.owner.principal]++
}

// removeLocked takes s out of the cache.
func (c *fetchSessionCache) removeLocked(s *fetchSession) {
	delete(c.sessions, s.id)
	c.bytes -= s.cost
	if c.byConn[s.owner.conn]--; c.byConn[s.owner.conn] <= 0 {
		delete(c.byConn, s.owner.conn)
	}
	if c.byPrincipal[s.owner.principal]--; c.byPrincipal[s.owner.principal] <= 0 {
		delete(c.byPrincipal, s.owner.principal)
	}
}
