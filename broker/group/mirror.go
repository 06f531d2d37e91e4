package group

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
)

// memberNode is the JSON of /consumers/<group>/ids/<member>.
type memberNode struct {
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	InstanceID *string  `json:"instance_id,omitempty"`
	Topics     []string `json:"topics"`
}

// mirrorState is the membership of one group as the store should show it:
// member ID -> memberNode JSON, and partition -> owning member ID.
type mirrorState struct {
	ids    map[string][]byte
	owners map[topicPartition]string
	// moved: the group moved to another coordinator; only the nodes of the
	// members in ids are removed.
	moved bool
}

func (s *mirrorState) empty() bool { return len(s.ids) == 0 && len(s.owners) == 0 }

// publishLocked hands g's current membership to the mirror writer. It never
// blocks on the store.
func (c *Coordinator) publishLocked(g *group) {
	st := &mirrorState{ids: make(map[string][]byte), owners: make(map[topicPartition]string)}
	if g.state != stateDead {
		for _, m := range g.members {
			node := memberNode{ClientID: m.clientID, ClientHost: m.clientHost, InstanceID: m.instanceID, Topics: []string{}}
			if g.protocolType == consumerProtocolType {
				if ts, ok := memberTopics(m, g.protocol); ok {
					node.Topics = append(node.Topics, ts...)
				}
			}
			data, err := json.Marshal(node)
			if err != nil {
				continue // cannot happen: strings and slices only
			}
			st.ids[m.id] = data
		}
	}
	// Owners exist only while an assignment is in force: during a rebalance
	// every partition is released, as the seed's consumers did.
	if g.state == stateStable && g.protocolType == consumerProtocolType {
		for _, m := range g.members {
			var a kmsg.ConsumerMemberAssignment
			if len(m.assignment) == 0 || a.ReadFrom(m.assignment) != nil {
				continue
			}
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					st.owners[topicPartition{t.Topic, p}] = m.id
				}
			}
		}
	}
	c.mirror.publish(g.id, st)
}

// mirror writes membership mirrors to the store from one goroutine, latest
// state per group winning, so the protocol never waits on (or fails with)
// the store.
type mirror struct {
	store  coord.Store
	log    *slog.Logger
	resync time.Duration // see Config.MirrorResync
	wake   chan struct{} // buffered 1: "pending has something"
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex // guards the following
	pending map[string]*mirrorState
	closed  bool

	// desired is the last state of each non-empty group; only the writer
	// goroutine touches it.
	desired map[string]*mirrorState
}

func newMirror(store coord.Store, resync time.Duration, logger *slog.Logger) *mirror {
	m := &mirror{
		store:   store,
		resync:  resync,
		log:     logger,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		pending: make(map[string]*mirrorState),
		desired: make(map[string]*mirrorState),
	}
	m.wg.Add(1)
	go m.run()
	return m
}

// publish records the desired state of a group for the writer.
func (m *mirror) publish(group string, st *mirrorState) {
	m.mu.Lock()
	if !m.closed {
		m.pending[group] = st
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// retract drops group from the writer's states and removes the nodes that
// still name one of members (ids, and owners whose data is such a member),
// leaving the rest alone: another coordinator keeps the group's nodes now.
func (m *mirror) retract(group string, members []string) {
	st := &mirrorState{ids: make(map[string][]byte, len(members)), moved: true}
	for _, id := range members {
		st.ids[id] = nil
	}
	m.publish(group, st)
}

// close stops the writer and waits for it. Pending states are dropped: the
// ephemeral nodes end with the store session anyway.
func (m *mirror) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	close(m.done)
	m.wg.Wait()
}

func (m *mirror) run() {
	defer m.wg.Done()
	resync := time.NewTicker(m.resync)
	defer resync.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-m.wake:
			m.mu.Lock()
			batch := m.pending
			m.pending = make(map[string]*mirrorState)
			m.mu.Unlock()
			groups := make([]string, 0, len(batch))
			for g := range batch {
				groups = append(groups, g)
			}
			sort.Strings(groups)
			for _, g := range groups {
				st := batch[g]
				if st.moved {
					delete(m.desired, g)
					m.removeMembers(g, st.ids)
					continue
				}
				if st.empty() {
					delete(m.desired, g)
				} else {
					m.desired[g] = st
				}
				m.apply(g, st)
			}
		case <-resync.C:
			for g, st := range m.desired {
				m.apply(g, st)
			}
		}
	}
}

// apply reconciles the store's ids and owners nodes of group with st,
// logging (never returning) failures; the next publish or resync retries.
func (m *mirror) apply(group string, st *mirrorState) {
	log := m.log.With("group", group)
	// ids
	existing, err := m.store.Children(idsPath(group))
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		log.Warn("mirror: listing member ids", "err", err)
		return
	}
	have := make(map[string]bool)
	for _, escaped := range existing {
		id, ok := coord.UnescapeName(escaped)
		if !ok {
			continue
		}
		have[id] = true
		if _, want := st.ids[id]; !want {
			m.remove(log, idsPath(group)+"/"+escaped)
		}
	}
	if len(st.ids) > 0 {
		if err := coord.EnsurePath(m.store, idsPath(group)); err != nil {
			log.Warn("mirror: creating ids path", "err", err)
			return
		}
	}
	for id, data := range st.ids {
		m.put(log, idsPath(group)+"/"+coord.EscapeName(id), data, have[id])
	}

	// owners
	topics, err := m.store.Children(ownersPath(group))
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		log.Warn("mirror: listing owned topics", "err", err)
		return
	}
	owned := make(map[topicPartition]bool)
	for _, escapedTopic := range topics {
		topic, ok := coord.UnescapeName(escapedTopic)
		if !ok {
			continue
		}
		topicPath := ownersPath(group) + "/" + escapedTopic
		parts, err := m.store.Children(topicPath)
		if err != nil {
			continue
		}
		kept := 0
		for _, ps := range parts {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil {
				continue
			}
			tp := topicPartition{topic, int32(p)}
			owned[tp] = true
			if _, want := st.owners[tp]; !want {
				m.remove(log, topicPath+"/"+ps)
				continue
			}
			kept++
		}
		if kept == 0 {
			// Best effort: a topic no longer owned leaves no empty node.
			if err := m.store.Delete(topicPath, coord.AnyVersion); err != nil &&
				!errors.Is(err, coord.ErrNoNode) && !errors.Is(err, coord.ErrNotEmpty) {
				log.Warn("mirror: removing owners topic node", "path", topicPath, "err", err)
			}
		}
	}
	for tp, owner := range st.owners {
		topicPath := ownersPath(group) + "/" + coord.EscapeName(tp.topic)
		if !owned[tp] {
			if err := coord.EnsurePath(m.store, topicPath); err != nil {
				log.Warn("mirror: creating owners path", "err", err)
				return
			}
		}
		m.put(log, topicPath+"/"+strconv.Itoa(int(tp.partition)), []byte(owner), owned[tp])
	}
}

// removeMembers deletes group's ids nodes of members and the owners nodes
// that name one of them. An owners node is deleted at the version read, so
// one the new coordinator rewrote meanwhile stays.
func (m *mirror) removeMembers(group string, members map[string][]byte) {
	log := m.log.With("group", group)
	for id := range members {
		m.remove(log, idsPath(group)+"/"+coord.EscapeName(id))
	}
	topics, err := m.store.Children(ownersPath(group))
	if err != nil {
		return // none, or the next coordinator's resync reconciles them
	}
	for _, topic := range topics {
		topicPath := ownersPath(group) + "/" + topic
		parts, err := m.store.Children(topicPath)
		if err != nil {
			continue
		}
		for _, p := range parts {
			data, stat, err := m.store.Get(topicPath + "/" + p)
			if _, ours := members[string(data)]; err != nil || !ours {
				continue
			}
			if err := m.store.Delete(topicPath+"/"+p, stat.Version); err != nil &&
				!errors.Is(err, coord.ErrNoNode) && !errors.Is(err, coord.ErrBadVersion) {
				log.Warn("mirror: removing node", "path", topicPath+"/"+p, "err", err)
			}
		}
	}
}

// put makes path an ephemeral node holding data.
func (m *mirror) put(log *slog.Logger, path string, data []byte, exists bool) {
	if exists {
		old, _, err := m.store.Get(path)
		if err == nil && bytes.Equal(old, data) {
			return
		}
		if err == nil {
			if _, err = m.store.Set(path, data, coord.AnyVersion); err == nil {
				return
			}
		}
		if !errors.Is(err, coord.ErrNoNode) {
			log.Warn("mirror: updating node", "path", path, "err", err)
			return
		}
	}
	if _, err := m.store.Create(path, data, coord.Ephemeral); err != nil {
		log.Warn("mirror: creating node", "path", path, "err", err)
	}
}

// remove deletes path if it exists.
func (m *mirror) remove(log *slog.Logger, path string) {
	if err := m.store.Delete(path, coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
		log.Warn("mirror: removing node", "path", path, "err", err)
	}
}
