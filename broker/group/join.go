package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup serves JoinGroup v0–v9. It blocks until the rebalance the join
// belongs to completes, ctx ends (REBALANCE_IN_PROGRESS; the join still counts,
// as it does in Kafka when a client disconnects) or the coordinator closes
// (NOT_COORDINATOR).
//
// From v4 a join with an empty member ID is answered at once with
// MEMBER_ID_REQUIRED and an assigned ID (KIP-394); the client rejoins with it.
// Older versions get their ID assigned directly.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	fail := func(code int16, memberID string) *kmsg.JoinGroupResponse {
		resp := joinError(req.Version, code)
		resp.MemberID = memberID
		return resp
	}
	if !supported(keyJoinGroup, req.Version) {
		return fail(errUnsupportedVersion, req.MemberID)
	}
	if !c.validGroupID(req.Group) {
		return fail(errInvalidGroupID, req.MemberID)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return fail(errInvalidSessionTimeout, req.MemberID)
	}
	rebalance := session // v0 has no rebalance timeout: Kafka uses the session timeout
	if req.Version >= 1 && req.RebalanceTimeoutMillis > 0 {
		rebalance = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	var instance *string
	if req.Version >= 5 && req.InstanceID != nil && *req.InstanceID != "" {
		id := *req.InstanceID
		instance = &id
	}
	j := joinArgs{
		req: req, client: clientFrom(ctx), instance: instance,
		session: session, rebalance: rebalance,
	}

	if req.MemberID == "" {
		if code := c.admitGroup(req.Group); code != errNone {
			return fail(code, req.MemberID)
		}
	}
	g := c.lockGroup(req.Group, req.MemberID == "")
	if g == nil {
		if !c.coordinates(req.Group) {
			return fail(errNotCoordinator, req.MemberID)
		}
		return fail(errUnknownMemberID, req.MemberID)
	}
	resp, wait := c.joinLocked(g, j)
	g.mu.Unlock()
	if resp != nil {
		if resp.ErrorCode != errNone && resp.ErrorCode != errMemberIDRequired {
			// A refused join must not leave an empty group behind: it
			// would count against Config.MaxGroups for good.
			g.offsetMu.Lock()
			g.mu.Lock()
			c.releaseIfUnusedLocked(g)
			g.mu.Unlock()
			g.offsetMu.Unlock()
		}
		return resp
	}
	select {
	case resp := <-wait:
		return resp
	case <-ctx.Done():
		return fail(errRebalanceInProgress, req.MemberID)
	case <-c.done:
		return fail(errNotCoordinator, req.MemberID)
	}
}

// joinError is a JoinGroup response carrying only an error code.
func joinError(version, code int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.ErrorCode = code
	resp.Generation = -1
	return resp
}

// joinArgs is a validated JoinGroup request.
type joinArgs struct {
	req       *kmsg.JoinGroupRequest
	client    ClientInfo
	instance  *string
	session   time.Duration
	rebalance time.Duration
}

// joinLocked applies a join to g. It returns either an immediate response or a
// channel on which the response will arrive when the rebalance completes.
func (c *Coordinator) joinLocked(g *group, j joinArgs) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	req := j.req
	fail := func(code int16) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
		resp := joinError(req.Version, code)
		resp.MemberID = req.MemberID
		return resp, nil
	}
	if !g.supportsProtocolsLocked(req.ProtocolType, req.Protocols) {
		return fail(errInconsistentGroupProtocol)
	}

	if req.MemberID == "" {
		prefix := j.client.ID
		if j.instance != nil {
			prefix = *j.instance
		}
		id := newMemberID(prefix)
		if j.instance != nil {
			if old, ok := g.instances[*j.instance]; ok {
				return c.replaceStaticMemberLocked(g, old, id, j)
			}
			// Static members skip MEMBER_ID_REQUIRED: their instance ID already
			// bounds how many members a flaky client can create.
			return nil, c.addMemberAndRebalanceLocked(g, id, j)
		}
		if req.Version >= 4 {
			p := &pendingMember{}
			p.expiry = c.afterLocked(g, j.session, func() { c.expirePendingLocked(g, id) })
			g.pending[id] = p
			resp := joinError(req.Version, errMemberIDRequired)
			resp.MemberID = id
			return resp, nil
		}
		return nil, c.addMemberAndRebalanceLocked(g, id, j)
	}

	if p, ok := g.pending[req.MemberID]; ok {
		c.stopTimer(p.expiry)
		delete(g.pending, req.MemberID)
		return nil, c.addMemberAndRebalanceLocked(g, req.MemberID, j)
	}
	m, ok := g.members[req.MemberID]
	if code := g.checkInstanceLocked(req.MemberID, j.instance); code != errNone {
		return fail(code)
	}
	if !ok {
		return fail(errUnknownMemberID)
	}
	switch g.state {
	case statePreparingRebalance:
		return nil, c.updateMemberAndRebalanceLocked(g, m, j)
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// The member missed the join response (a retry): send it again.
			return c.joinResponseLocked(g, m, req.Version), nil
		}
		return nil, c.updateMemberAndRebalanceLocked(g, m, j)
	case stateStable:
		if m.id == g.leader || !m.sameProtocols(req.Protocols) {
			// A leader's join asks for a new assignment (for example after a
			// metadata change); changed protocols need a new vote.
			return nil, c.updateMemberAndRebalanceLocked(g, m, j)
		}
		return c.joinResponseLocked(g, m, req.Version), nil
	default:
		return fail(errUnknownMemberID)
	}
}

// checkInstanceLocked fences a static member whose instance ID now belongs to
// another member ID (KIP-345).
func (g *group) checkInstanceLocked(memberID string, instance *string) int16 {
	if instance == nil {
		return errNone
	}
	if owner, ok := g.instances[*instance]; ok && owner != memberID {
		return errFencedInstanceID
	}
	return errNone
}

// addMemberAndRebalanceLocked adds a member waiting for the rebalance and
// starts (or advances) one.
func (c *Coordinator) addMemberAndRebalanceLocked(g *group, id string, j joinArgs) chan *kmsg.JoinGroupResponse {
	if len(g.members) == 0 {
		g.protocolType = j.req.ProtocolType
	}
	g.nextSeq++
	m := &member{
		id:               id,
		instanceID:       j.instance,
		clientID:         j.client.ID,
		clientHost:       j.client.Host,
		sessionTimeout:   j.session,
		rebalanceTimeout: j.rebalance,
		protocols:        j.req.Protocols,
		seq:              g.nextSeq,
	}
	g.members[id] = m
	if j.instance != nil {
		g.instances[*j.instance] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWaiter, m.joinVersion = wait, j.req.Version
	g.newMemberAdded = true
	c.heartbeatLocked(g, m)
	c.log.Info("member joined", "group", g.id, "member", id, "client", j.client.ID, "state", g.state.String())
	c.maybePrepareRebalanceLocked(g, "member "+id+" joined")
	c.tryCompleteJoinLocked(g)
	c.publishLocked(g)
	return wait
}

// updateMemberAndRebalanceLocked records a known member's rejoin.
func (c *Coordinator) updateMemberAndRebalanceLocked(g *group, m *member, j joinArgs) chan *kmsg.JoinGroupResponse {
	m.protocols = j.req.Protocols
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	if j.client.ID != "" || j.client.Host != "" {
		m.clientID, m.clientHost = j.client.ID, j.client.Host
	}
	if m.joinWaiter != nil {
		// A second join from the same member supersedes the first.
		m.joinWaiter <- joinError(m.joinVersion, errRebalanceInProgress)
	}
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWaiter, m.joinVersion = wait, j.req.Version
	c.heartbeatLocked(g, m)
	c.maybePrepareRebalanceLocked(g, "member "+m.id+" rejoined")
	c.tryCompleteJoinLocked(g)
	return wait
}

// replaceStaticMemberLocked gives a returning static member (known instance
// ID, empty member ID) a new member ID in place of the old one.
func (c *Coordinator) replaceStaticMemberLocked(g *group, oldID, newID string, j joinArgs) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	m := g.members[oldID]
	if m == nil {
		delete(g.instances, *j.instance)
		return nil, c.addMemberAndRebalanceLocked(g, newID, j)
	}
	// Fence whatever the old member ID was waiting for.
	m.failWaitersLocked(errFencedInstanceID)
	delete(g.members, oldID)
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	m.id = newID
	g.members[newID] = m
	g.instances[*j.instance] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	m.clientID, m.clientHost = j.client.ID, j.client.Host
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	c.log.Info("static member replaced", "group", g.id, "instance", *j.instance, "old_member", oldID, "member", newID)

	switch {
	case g.state == statePreparingRebalance:
		m.protocols = j.req.Protocols
		wait := make(chan *kmsg.JoinGroupResponse, 1)
		m.joinWaiter, m.joinVersion = wait, j.req.Version
		c.heartbeatLocked(g, m)
		c.tryCompleteJoinLocked(g)
		c.publishLocked(g)
		return nil, wait
	case g.state == stateStable && m.sameProtocols(j.req.Protocols):
		// KIP-345: the restarted instance takes its old place; no rebalance.
		c.heartbeatLocked(g, m)
		resp := c.joinResponseLocked(g, m, j.req.Version)
		if m.id == g.leader {
			// KIP-814: the leader gets the members but must not reassign.
			resp.SkipAssignment = j.req.Version >= 9
		}
		c.publishLocked(g)
		return resp, nil
	default:
		m.protocols = j.req.Protocols
		wait := make(chan *kmsg.JoinGroupResponse, 1)
		m.joinWaiter, m.joinVersion = wait, j.req.Version
		c.heartbeatLocked(g, m)
		c.prepareRebalanceLocked(g, "static member "+*j.instance+" rejoined with new protocols")
		c.publishLocked(g)
		return nil, wait
	}
}

// joinResponseLocked is the successful JoinGroup response for m in the
// current generation; the leader also gets every member's metadata.
func (c *Coordinator) joinResponseLocked(g *group, m *member, version int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.Generation = g.generation
	protocolType, protocol := g.protocolType, g.protocol
	resp.ProtocolType = &protocolType
	resp.Protocol = &protocol
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if m.id == g.leader {
		for _, o := range g.sortedMembersLocked() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			rm.InstanceID = o.instanceID
			rm.ProtocolMetadata = o.metadataFor(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

// maybePrepareRebalanceLocked starts a rebalance unless one is already
// gathering members.
func (c *Coordinator) maybePrepareRebalanceLocked(g *group, reason string) {
	switch g.state {
	case stateEmpty, stateStable, stateCompletingRebalance:
		c.prepareRebalanceLocked(g, reason)
	}
}

// prepareRebalanceLocked moves g to PreparingRebalance and arms the timer that
// ends it. An empty group waits InitialRebalanceDelay for more members first,
// so a fleet starting together gets one rebalance instead of one per member.
func (c *Coordinator) prepareRebalanceLocked(g *group, reason string) {
	if g.state == stateCompletingRebalance {
		// The assignment being distributed is void; followers waiting in
		// SyncGroup must rejoin.
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWaiter != nil {
				m.syncWaiter <- syncResult{errorCode: errRebalanceInProgress}
				m.syncWaiter = nil
			}
		}
	}
	c.stopTimer(g.syncTimer)
	g.pendingSync = nil
	c.stopTimer(g.joinTimer)
	wasEmpty := g.state == stateEmpty
	g.state = statePreparingRebalance
	timeout := g.maxRebalanceTimeoutLocked()
	if wasEmpty && c.cfg.InitialRebalanceDelay > 0 {
		delay := min(c.cfg.InitialRebalanceDelay, timeout)
		g.initialJoin = true
		g.initialLeft = max(timeout-delay, 0)
		g.newMemberAdded = false
		g.joinTimer = c.afterLocked(g, delay, func() { c.initialJoinExpiredLocked(g) })
	} else {
		g.initialJoin = false
		g.joinTimer = c.afterLocked(g, timeout, func() { c.completeJoinLocked(g) })
	}
	c.log.Info("preparing rebalance", "group", g.id, "generation", g.generation, "reason", reason)
	c.publishLocked(g)
	// Everyone may already be waiting (or nobody is left).
	c.tryCompleteJoinLocked(g)
}

// initialJoinExpiredLocked ends one period of the initial delay: while new
// members keep arriving and rebalance time is left, wait another period.
func (c *Coordinator) initialJoinExpiredLocked(g *group) {
	if g.newMemberAdded && g.initialLeft > 0 {
		g.newMemberAdded = false
		delay := min(c.cfg.InitialRebalanceDelay, g.initialLeft)
		g.initialLeft -= delay
		g.joinTimer = c.afterLocked(g, delay, func() { c.initialJoinExpiredLocked(g) })
		return
	}
	c.completeJoinLocked(g)
}

// tryCompleteJoinLocked completes the rebalance early once every member has
// rejoined (never during the initial delay, which exists to wait).
func (c *Coordinator) tryCompleteJoinLocked(g *group) {
	if g.state == statePreparingRebalance && !g.initialJoin && g.allJoinedLocked() {
		c.completeJoinLocked(g)
	}
}

// completeJoinLocked ends PreparingRebalance: members that did not rejoin are
// removed, the generation advances, a protocol is chosen and every waiting
// JoinGroup is answered.
func (c *Coordinator) completeJoinLocked(g *group) {
	if g.state != statePreparingRebalance {
		return
	}
	c.stopTimer(g.joinTimer)
	g.initialJoin = false
	for _, m := range g.sortedMembersLocked() {
		if m.joinWaiter == nil {
			c.log.Info("member did not rejoin in time; removing", "group", g.id, "member", m.id)
			c.removeMemberLocked(g, m)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		g.state = stateEmpty
		g.emptySince = c.cfg.Now()
		c.log.Info("group is empty", "group", g.id, "generation", g.generation)
		c.publishLocked(g)
		return
	}
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.sortedMembersLocked()[0].id
	}
	g.protocol = g.selectProtocolLocked()
	g.state = stateCompletingRebalance
	g.pendingSync = make(map[string]bool, len(g.members))
	for _, m := range g.members {
		g.pendingSync[m.id] = true
		m.joinWaiter <- c.joinResponseLocked(g, m, m.joinVersion)
		m.joinWaiter = nil
		c.heartbeatLocked(g, m)
	}
	g.syncTimer = c.afterLocked(g, g.maxRebalanceTimeoutLocked(), func() { c.syncExpiredLocked(g) })
	c.log.Info("rebalance complete; awaiting assignment", "group", g.id, "generation", g.generation,
		"protocol", g.protocol, "leader", g.leader, "members", len(g.members))
	c.publishLocked(g)
}

// syncExpiredLocked removes the members of a generation that never sent
// SyncGroup within the rebalance timeout (a leader that never assigns would
// otherwise stall the group) and starts a new rebalance.
func (c *Coordinator) syncExpiredLocked(g *group) {
	if g.state != stateCompletingRebalance && g.state != stateStable {
		return
	}
	removed := 0
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			c.log.Info("member did not sync in time; removing", "group", g.id, "member", id)
			c.removeMemberLocked(g, m)
			removed++
		}
	}
	g.pendingSync = nil
	if removed > 0 {
		c.prepareRebalanceLocked(g, "members did not sync in time")
		c.tryCompleteJoinLocked(g)
	}
}

// removeMemberLocked drops m from g without starting a rebalance.
func (c *Coordinator) removeMemberLocked(g *group, m *member) {
	c.stopTimer(m.expiry)
	m.failWaitersLocked(errUnknownMemberID)
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.instances[*m.instanceID] == m.id {
		delete(g.instances, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembersLocked(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// removeMemberAndRebalanceLocked drops m (left or expired) and rebalances the
// rest.
func (c *Coordinator) removeMemberAndRebalanceLocked(g *group, m *member, reason string) {
	c.removeMemberLocked(g, m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.prepareRebalanceLocked(g, reason)
	case statePreparingRebalance:
		c.tryCompleteJoinLocked(g)
	}
	c.publishLocked(g)
}

// heartbeatLocked restarts m's session.
func (c *Coordinator) heartbeatLocked(g *group, m *member) {
	m.deadline = time.Now().Add(m.sessionTimeout)
	if m.expiry == nil || m.expiry.stopped {
		c.armExpiryLocked(g, m, m.sessionTimeout)
	}
}

// armExpiryLocked arms m's session timer. Heartbeats only move the deadline;
// the timer re-arms itself for the remainder, so heartbeats cost no timer
// churn.
func (c *Coordinator) armExpiryLocked(g *group, m *member, d time.Duration) {
	m.expiry = c.afterLocked(g, d, func() {
		if g.members[m.id] != m {
			return
		}
		// Members blocked in JoinGroup or SyncGroup cannot heartbeat; the
		// rebalance and sync timeouts bound their wait instead.
		if m.joinWaiter != nil || m.syncWaiter != nil {
			c.armExpiryLocked(g, m, m.sessionTimeout)
			return
		}
		if left := time.Until(m.deadline); left > 0 {
			c.armExpiryLocked(g, m, left)
			return
		}
		c.log.Info("member session expired", "group", g.id, "member", m.id, "session_timeout", m.sessionTimeout)
		c.removeMemberAndRebalanceLocked(g, m, "member "+m.id+" session expired")
	})
}

// expirePendingLocked forgets a MEMBER_ID_REQUIRED member ID that was never
// used; a rebalance waiting for it may now complete.
func (c *Coordinator) expirePendingLocked(g *group, id string) {
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	c.tryCompleteJoinLocked(g)
}
