// Package group is millrace's consumer-group coordinator: the Kafka classic
// group membership protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
// committed-offset storage (OffsetCommit, OffsetFetch, OffsetDelete,
// TxnOffsetCommit), plus the
// admin APIs DescribeGroups, ListGroups and DeleteGroups.
//
// The wire server decodes a request with kmsg, calls the method of the same
// name and encodes the returned response; Versions lists what is served.
// Kafka errors are response data: the methods never return Go errors. The
// client ID and peer host, which are not in the request body, travel in the
// context:
//
//	ctx = group.WithClient(ctx, group.ClientInfo{ID: header.ClientID, Host: "/" + peerIP})
//	resp := coordinator.JoinGroup(ctx, req) // blocks until the rebalance completes
//
// JoinGroup and SyncGroup block; every other method answers at once.
//
// In a cluster each group is coordinated by one broker (Config.Owner, which
// the broker answers from cluster.GroupCoordinator); requests for a group
// this broker does not coordinate get NOT_COORDINATOR, so the client finds
// the coordinator again. A group that moved away is abandoned: its members
// and mirrors are the new coordinator's business, and if the group comes
// back it starts afresh.
//
// Committed offsets live in the coordination store at
// /consumers/<group>/offsets/<topic>/<partition> (the store is the truth; a
// per-group cache is loaded lazily, and again after the coordinator's view
// of the live brokers changed). In a cluster, offset writes are fenced by
// the version of /consumers/<group>/coordinator, which a broker bumps when
// it takes the group up (see coordinatorPath). Membership is mirrored, best effort, to
// ephemeral /consumers/<group>/ids/<member> and
// /consumers/<group>/owners/<topic>/<partition> nodes for operators and tools.
//
// Static membership (KIP-345, JoinGroup v5+): a join with a known
// group.instance.id and an empty member ID replaces the old member ID; when the
// group is Stable and the protocols are unchanged no rebalance happens and the
// new member ID inherits the old assignment. The old member ID is then fenced
// (FENCED_INSTANCE_ID). Static members are removed by session expiry or
// LeaveGroup like dynamic ones.
//
// Committed offsets of a group without members expire after
// Config.OffsetsRetention (offsets.retention.minutes, KIP-211), and a group
// left without offsets is deleted (retention.go). Group IDs are at most
// Config.MaxGroupIDBytes long and the coordinator holds at most
// Config.MaxGroups groups in memory.
//
// Transactional offset commits (TxnOffsetCommit) stay pending, beside the
// group in the store, until the transaction's marker completes them
// (CompleteTxnOffsets; txn_offsets.go).
//
// Not supported: the KIP-848 consumer protocol, and the per-commit
// retention time of OffsetCommit v2–v4.
package group

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/coord"
)

// Coordinator runs every consumer group of a broker. All methods are safe for
// concurrent use.
type Coordinator struct {
	store  coord.Store
	cfg    Config
	log    *slog.Logger
	mirror *mirror

	closed  atomic.Bool
	done    chan struct{}  // closed by Close; ends waiting JoinGroup/SyncGroup calls
	timers  sync.WaitGroup // one count per armed timer whose callback may still run
	watcher sync.WaitGroup // expireLoop, and watchOwnership when Config.Owner is set
	// groupsFullLogged is set once a group was refused for Config.MaxGroups
	// and cleared when a group is forgotten, so that the refusal is logged
	// once per episode, not once per request.
	groupsFullLogged atomic.Bool
	closeOnce        sync.Once

	mu     sync.Mutex // guards the following
	groups map[string]*group
}

// New returns a coordinator that keeps offsets and membership mirrors in
// store. Zero Config fields take their defaults; an invalid Config is logged
// and replaced by DefaultConfig. Close releases its timers and goroutines.
func New(store coord.Store, cfg Config, logger *slog.Logger) *Coordinator {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "group")
	if err := cfg.Validate(); err != nil {
		logger.Error("invalid group coordinator config; using defaults", "err", err)
		partitionExists, now := cfg.PartitionExists, cfg.Now
		cfg = DefaultConfig()
		cfg.PartitionExists, cfg.Now = partitionExists, now
	}
	c := &Coordinator{
		store:  store,
		cfg:    cfg.withDefaults(),
		log:    logger,
		done:   make(chan struct{}),
		groups: make(map[string]*group),
	}
	c.mirror = newMirror(store, c.cfg.MirrorResync, logger)
	c.watcher.Add(1)
	go c.expireLoop()
	if c.cfg.Owner != nil {
		c.watcher.Add(1)
		go c.watchOwnership()
	}
	return c
}

// Close stops every timer, answers waiting JoinGroup and SyncGroup calls with
// NOT_COORDINATOR (so clients look the coordinator up again) and stops the
// mirror writer. Ephemeral mirrors are left to the store session's owner.
// Requests after Close are answered with NOT_COORDINATOR.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		c.watcher.Wait()
		c.mu.Lock()
		groups := make([]*group, 0, len(c.groups))
		for _, g := range c.groups {
			groups = append(groups, g)
		}
		c.mu.Unlock()
		for _, g := range groups {
			g.mu.Lock()
			c.stopTimersLocked(g)
			g.mu.Unlock()
		}
		c.timers.Wait()
		c.mirror.close()
	})
	return nil
}

// stopTimersLocked disarms every timer of g.
func (c *Coordinator) stopTimersLocked(g *group) {
	c.stopTimer(g.joinTimer)
	c.stopTimer(g.syncTimer)
	for _, m := range g.members {
		c.stopTimer(m.expiry)
	}
	for _, p := range g.pending {
		c.stopTimer(p.expiry)
	}
}

// timer is a one-shot timer whose callback runs under its group's lock.
// stopped is guarded by that lock; a callback that lost the race with stop sees
// it and does nothing.
type timer struct {
	t       *time.Timer
	stopped bool
}

// afterLocked arms a timer that runs f with g.mu held after d. After Close it
// arms nothing.
func (c *Coordinator) afterLocked(g *group, d time.Duration, f func()) *timer {
	tm := &timer{}
	if c.closed.Load() {
		tm.stopped = true
		return tm
	}
	c.timers.Add(1)
	tm.t = time.AfterFunc(d, func() {
		defer c.timers.Done()
		g.mu.Lock()
		defer g.mu.Unlock()
		if tm.stopped || c.closed.Load() {
			return
		}
		tm.stopped = true
		f()
	})
	return tm
}

// stopTimer disarms tm; the caller holds the lock of tm's group.
func (c *Coordinator) stopTimer(tm *timer) {
	if tm == nil || tm.stopped {
		return
	}
	tm.stopped = true
	if tm.t.Stop() {
		// The callback will never run, so it will never release its count.
		c.timers.Done()
	}
}

// lockGroup returns the named group with its mu held, creating it when create
// is set. It returns nil when the group does not exist (or the coordinator is
// closed). A Dead group found in the map is skipped: it was deleted and a new
// object takes its place.
func (c *Coordinator) lockGroup(id string, create bool) *group {
	for {
		g := c.getGroup(id, create)
		if g == nil {
			return nil
		}
		g.mu.Lock()
		if g.state != stateDead {
			return g
		}
		g.mu.Unlock()
		c.forgetGroup(g)
	}
}

// getGroup returns the named group without locking it.
func (c *Coordinator) getGroup(id string, create bool) *group {
	if !c.coordinates(id) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if g == nil && create {
		g = newGroup(id)
		c.groups[id] = g
	}
	return g
}

// coordinates reports whether this coordinator serves group id now: it is
// open, and this broker coordinates the group (Config.Owner). Requests for a
// group it does not serve get NOT_COORDINATOR.
func (c *Coordinator) coordinates(id string) bool {
	owned, _ := c.owner(id)
	return owned && !c.closed.Load()
}

// owner reports whether this broker coordinates group id (Config.Owner).
func (c *Coordinator) owner(id string) (bool, uint64) {
	if c.cfg.Owner == nil {
		return true, 0
	}
	return c.cfg.Owner(id)
}

// ownershipCheck is how often the coordinator looks whether its view of the
// live brokers changed, and with it which groups it coordinates.
const ownershipCheck = 250 * time.Millisecond

// watchOwnership abandons the groups that moved to another broker, soon after
// this broker's view of the live brokers changed. Otherwise a group coming
// back (its new coordinator died) would find the members and generation it
// had before it left, and its rebalance would wait for members long gone;
// and the old membership would keep being written to the store's mirror
// nodes, which the new coordinator now keeps.
func (c *Coordinator) watchOwnership() {
	defer c.watcher.Done()
	tick := time.NewTicker(ownershipCheck)
	defer tick.Stop()
	_, seen := c.owner("")
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		if _, gen := c.owner(""); gen != seen {
			seen = gen
			c.abandonMovedGroups()
		}
	}
}

// abandonMovedGroups drops every group this broker no longer coordinates:
// waiting JoinGroup and SyncGroup calls get NOT_COORDINATOR, timers stop, and
// the mirror removes the nodes of its members (the new coordinator writes its
// own). A group that comes back later starts afresh, its offsets read from
// the store.
func (c *Coordinator) abandonMovedGroups() {
	c.mu.Lock()
	var moved []*group
	for id, g := range c.groups {
		if owned, _ := c.owner(id); !owned {
			moved = append(moved, g)
		}
	}
	c.mu.Unlock()
	for _, g := range moved {
		g.mu.Lock()
		if g.state != stateDead {
			c.log.Info("group moved to another coordinator; abandoning it here", "group", g.id, "members", len(g.members))
			g.state = stateDead
			c.stopTimersLocked(g)
			members := make([]string, 0, len(g.members))
			for _, m := range g.members {
				members = append(members, m.id)
				m.failWaitersLocked(errNotCoordinator)
			}
			c.forgetGroup(g)
			c.mirror.retract(g.id, members)
		}
		g.mu.Unlock()
	}
}

// forgetGroup removes g from the map if it is still the group under its ID.
func (c *Coordinator) forgetGroup(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
		c.groupsFullLogged.Store(false)
	}
}

// clientKey is the context key of ClientInfo.
type clientKey struct{}

// ClientInfo identifies the connection a request came from. Kafka carries the
// client ID in the request header and the host is the peer address, so neither
// is in the kmsg request; the wire server attaches them with WithClient.
type ClientInfo struct {
	ID   string // client.id from the request header
	Host string // peer host, as Kafka reports it ("/127.0.0.1")
}

// WithClient returns ctx carrying the client's identity, read by JoinGroup
// (member IDs, DescribeGroups, the ids mirror).
func WithClient(ctx context.Context, info ClientInfo) context.Context {
	return context.WithValue(ctx, clientKey{}, info)
}

func clientFrom(ctx context.Context) ClientInfo {
	info, _ := ctx.Value(clientKey{}).(ClientInfo)
	return info
}

// newMemberID returns prefix-<uuid>, Kafka's member ID shape.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
