package group

import (
	"bytes"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is a group's place in the classic rebalance protocol.
//
//	Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//	  ▲                  ▲        │ (no members left)                  │ leader's SyncGroup
//	  └──────────────────┼────────┘                                    ▼
//	                     └──────── join / leave / expiry ─────────── Stable
//
// Dead is terminal: the group was deleted and its object must not be reused.
type state int8

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String returns the state's name as Kafka spells it in DescribeGroups and
// ListGroups.
func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

// consumerProtocolType is the protocol type of Kafka consumers, whose member
// metadata and assignments follow the consumer protocol (decoded for mirrors).
const consumerProtocolType = "consumer"

// member is one member of a group's current or coming generation.
type member struct {
	id               string
	instanceID       *string // static membership (KIP-345); nil for dynamic members
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte
	seq              uint64 // join order; the lowest becomes leader

	// joinWaiter is set while the member's JoinGroup waits for the rebalance;
	// its presence is what "the member has rejoined" means. Buffered 1 so that
	// completing a rebalance never blocks on a caller that went away.
	joinWaiter  chan *kmsg.JoinGroupResponse
	joinVersion int16
	// syncWaiter is set while a follower's SyncGroup waits for the leader.
	syncWaiter  chan syncResult
	syncVersion int16

	deadline time.Time // the session ends unless a heartbeat comes before
	expiry   *timer    // fires at deadline
}

// failWaitersLocked answers the member's waiting JoinGroup or SyncGroup, if
// any, with the error code. The caller holds the group's lock.
func (m *member) failWaitersLocked(code int16) {
	if m.joinWaiter != nil {
		m.joinWaiter <- joinError(m.joinVersion, code)
		m.joinWaiter = nil
	}
	if m.syncWaiter != nil {
		m.syncWaiter <- syncResult{errorCode: code}
		m.syncWaiter = nil
	}
}

// syncResult is what a waiting SyncGroup receives.
type syncResult struct {
	errorCode  int16
	assignment []byte
}

// metadataFor returns the member's metadata for the named protocol.
func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// sameProtocols reports whether protocols equals what the member last sent,
// in order, names and metadata.
func (m *member) sameProtocols(protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(protocols) != len(m.protocols) {
		return false
	}
	for i, p := range protocols {
		if p.Name != m.protocols[i].Name || !bytes.Equal(p.Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// pendingMember is a member ID handed out with MEMBER_ID_REQUIRED (KIP-394)
// that has not rejoined yet. It expires after the session timeout.
type pendingMember struct {
	expiry *timer
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// group is one consumer group. Membership (mu) and offsets (offsetMu) have
// separate locks so a slow store write for a commit never stalls heartbeats.
// Lock order: offsetMu before mu.
type group struct {
	id string

	offsetMu      sync.Mutex // guards the following; held across offset store writes
	offsetsLoaded bool
	offsetsGen    uint64 // Config.Owner's generation when the offsets were loaded
	fence         int32  // version this broker set on coordinatorPath, or unfenced
	offsets       map[topicPartition]offsetEntry
	// txnOffsets holds the offsets transactions committed (TxnOffsetCommit)
	// that their transaction's marker has not yet completed, by producer ID
	// (txn_offsets.go). Loaded with offsets.
	txnOffsets map[int64]*pendingTxnOffsets

	mu             sync.Mutex // guards the following
	state          state
	generation     int32
	protocolType   string
	protocol       string
	leader         string
	members        map[string]*member
	instances      map[string]string // instance ID -> member ID
	pending        map[string]*pendingMember
	nextSeq        uint64
	joinTimer      *timer // completes the rebalance (delayed join)
	initialJoin    bool   // joinTimer is the initial delayed join
	initialLeft    time.Duration
	newMemberAdded bool
	pendingSync    map[string]bool // members of this generation that have not sent SyncGroup
	syncTimer      *timer          // removes members that never sent SyncGroup
	// emptySince is when the group last became Empty after having members
	// (zero if it has not since this broker took it up): KIP-211's
	// retention of a consumer group's offsets starts then.
	emptySince time.Time
}

func newGroup(id string) *group {
	return &group{
		id:         id,
		fence:      unfenced,
		offsets:    make(map[topicPartition]offsetEntry),
		txnOffsets: make(map[int64]*pendingTxnOffsets),
		members:    make(map[string]*member),
		instances:  make(map[string]string),
		pending:    make(map[string]*pendingMember),
	}
}

// sortedMembersLocked returns the members in join order.
func (g *group) sortedMembersLocked() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

// candidateProtocolsLocked returns the protocol names every member supports,
// in the order the earliest member prefers them.
func (g *group) candidateProtocolsLocked() []string {
	ms := g.sortedMembersLocked()
	if len(ms) == 0 {
		return nil
	}
	var out []string
	for _, p := range ms[0].protocols {
		all := true
		for _, m := range ms[1:] {
			if !hasProtocol(m.protocols, p.Name) {
				all = false
				break
			}
		}
		if all {
			out = append(out, p.Name)
		}
	}
	return out
}

func hasProtocol(ps []kmsg.JoinGroupRequestProtocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// supportsProtocolsLocked reports whether a member with this protocol type and
// protocols may join: an empty group takes anything non-empty; otherwise the
// type must match and one protocol must be shared with every member.
func (g *group) supportsProtocolsLocked(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(protocols) == 0 || protocolType == "" {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, name := range g.candidateProtocolsLocked() {
		if hasProtocol(protocols, name) {
			return true
		}
	}
	return false
}

// selectProtocolLocked picks the generation's protocol by vote, as Kafka does:
// each member votes for its most preferred protocol among those all members
// support; the most votes wins, ties going to the earliest member's preference.
func (g *group) selectProtocolLocked() string {
	candidates := g.candidateProtocolsLocked()
	if len(candidates) == 0 {
		return ""
	}
	votes := make(map[string]int, len(candidates))
	for _, m := range g.members {
		for _, p := range m.protocols {
			if contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, name := range candidates[1:] {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// maxRebalanceTimeoutLocked is the longest rebalance timeout of any member:
// the time a rebalance waits for stragglers.
func (g *group) maxRebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// allJoinedLocked reports whether every member has rejoined and no member ID
// handed out with MEMBER_ID_REQUIRED is still outstanding.
func (g *group) allJoinedLocked() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWaiter == nil {
			return false
		}
	}
	return true
}

// subscribedTopicsLocked returns the topics the members subscribe to, decoded
// from consumer-protocol metadata; ok is false when they cannot be known
// (another protocol type, or undecodable metadata).
func (g *group) subscribedTopicsLocked() (topics map[string]bool, ok bool) {
	topics = make(map[string]bool)
	if g.protocolType != consumerProtocolType {
		return topics, len(g.members) == 0
	}
	for _, m := range g.members {
		ts, ok := memberTopics(m, g.protocol)
		if !ok {
			return topics, false
		}
		for _, t := range ts {
			topics[t] = true
		}
	}
	return topics, true
}

// memberTopics decodes the topics of a consumer-protocol member's metadata for
// protocol (or its first protocol while none is selected yet).
func memberTopics(m *member, protocol string) ([]string, bool) {
	var meta []byte
	if protocol != "" {
		meta = m.metadataFor(protocol)
	} else if len(m.protocols) > 0 {
		meta = m.protocols[0].Metadata
	}
	var cm kmsg.ConsumerMemberMetadata
	if err := cm.ReadFrom(meta); err != nil {
		return nil, false
	}
	return cm.Topics, true
}

// existsLocked reports whether g is a group worth reporting: it has or had
// members, or has committed offsets, pending transactional ones included. A
// group object made only to answer a lookup is not. The caller holds
// offsetMu (offsets loaded) and mu.
func (g *group) existsLocked() bool {
	return len(g.members) > 0 || g.state != stateEmpty || g.generation > 0 || len(g.offsets) > 0 || len(g.txnOffsets) > 0
}
