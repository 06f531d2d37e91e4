package tier

import (
	"slices"
	"sort"
	"sync"

	"millrace/broker/log"
)

// Index is the RemoteIndex a broker's read side uses: the remote state of
// every tiered partition this broker hosts, as the Manager last read or
// wrote it, answered from memory. The Manager keeps it current: a leader
// updates it with every state it commits (an upload, an expiry,
// DeleteRecords), every replica with the state its round reads, and a
// broker that becomes a partition's leader reads the state at once
// (Manager.refreshLeaders), since its predecessor may have expired remote
// segments since this broker's last round. It is safe for concurrent use.
type Index struct {
	mu      sync.RWMutex // guards entries
	entries map[log.TopicPartition]indexEntry
}

// indexEntry is one partition's remote state as the index answers it.
type indexEntry struct {
	// topicID and leaderEpoch are those of the partition as this broker
	// hosted it when the entry was noted; refreshLeaders reads the state
	// again when either differs from the partition's now.
	topicID     [16]byte
	leaderEpoch int32
	leader      bool
	// start is the first remote offset; segments are the state's, by
	// base offset, each with a larger last offset than the one before
	// (state.go), never modified once noted.
	start    int64
	segments []Segment
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{entries: map[log.TopicPartition]indexEntry{}}
}

// RemoteBounds returns the partition's remote log start offset and its
// last remote offset; false when it has no remote segment at or after the
// start.
func (x *Index) RemoteBounds(topic string, partition int32) (start, last int64, ok bool) {
	x.mu.RLock()
	e, found := x.entries[log.TopicPartition{Topic: topic, Partition: partition}]
	x.mu.RUnlock()
	if !found || len(e.segments) == 0 {
		return 0, 0, false // not tiered here, or nothing uploaded yet
	}
	last = e.segments[len(e.segments)-1].LastOffset
	if last < e.start {
		return 0, 0, false
	}
	return e.start, last, true
}

// SegmentFor returns the remote segment a read of offset starts in: the
// first, in the state's order, whose last offset is at or above offset. After a
// leader change segments may overlap (the new leader uploads a straddling
// segment whole), and every reader must take the same one; the state keeps
// last offsets increasing, so the first such segment is found by binary
// search. An offset below the remote log start is in none: its records
// are deleted even where an object still holds them.
func (x *Index) SegmentFor(topic string, partition int32, offset int64) (Segment, bool) {
	x.mu.RLock()
	e, found := x.entries[log.TopicPartition{Topic: topic, Partition: partition}]
	x.mu.RUnlock()
	if !found || offset < e.start {
		return Segment{}, false
	}
	i := sort.Search(len(e.segments), func(i int) bool { return e.segments[i].LastOffset >= offset })
	if i == len(e.segments) {
		return Segment{}, false
	}
	return e.segments[i], true
}

// note records st as p's remote state; exists false (no state, or one of
// an earlier topic of the name) leaves the partition without segments.
func (x *Index) note(p Partition, st State, exists bool) {
	e := indexEntry{topicID: p.TopicID, leaderEpoch: p.LeaderEpoch, leader: p.Leader}
	if exists {
		e.start, e.segments = st.LogStartOffset, slices.Clone(st.Segments)
		if len(e.segments) > 0 {
			e.start = max(e.start, e.segments[0].BaseOffset)
		}
	}
	x.mu.Lock()
	x.entries[log.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = e
	x.mu.Unlock()
}

// current reports whether p's entry was noted as p is hosted now: same
// topic ID, leadership and leader epoch.
func (x *Index) current(p Partition) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.entries[log.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
	return ok && e.topicID == p.TopicID && e.leader == p.Leader && e.leaderEpoch == p.LeaderEpoch
}

// forget drops the partitions not in hosted.
func (x *Index) forget(hosted map[log.TopicPartition]bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for tp := range x.entries {
		if !hosted[tp] {
			delete(x.entries, tp)
		}
	}
}
