package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup serves SyncGroup v0–v5. The leader's call carries the assignment
// of every member and completes the rebalance; a follower's call blocks until
// that assignment arrives, ctx ends (REBALANCE_IN_PROGRESS) or the coordinator
// closes (NOT_COORDINATOR).
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	fail := func(code int16) *kmsg.SyncGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	if !supported(keySyncGroup, req.Version) {
		return fail(errUnsupportedVersion)
	}
	if !c.validGroupID(req.Group) {
		return fail(errInvalidGroupID)
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		if !c.coordinates(req.Group) {
			return fail(errNotCoordinator)
		}
		return fail(errUnknownMemberID)
	}
	code, wait := c.syncLocked(g, req, resp)
	g.mu.Unlock()
	if wait == nil {
		return fail(code)
	}
	select {
	case r := <-wait:
		resp.MemberAssignment = r.assignment
		return fail(r.errorCode)
	case <-ctx.Done():
		// The caller is gone; stop counting it as waiting so its session can
		// expire normally.
		if g := c.lockGroup(req.Group, false); g != nil {
			if m := g.members[req.MemberID]; m != nil && m.syncWaiter == wait {
				m.syncWaiter = nil
			}
			g.mu.Unlock()
		}
		return fail(errRebalanceInProgress)
	case <-c.done:
		return fail(errNotCoordinator)
	}
}

// syncLocked applies a SyncGroup to g. On success it fills resp's protocol
// fields and either the assignment (code errNone, nil channel) or returns a
// channel the assignment will arrive on.
func (c *Coordinator) syncLocked(g *group, req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) (int16, chan syncResult) {
	var instance *string
	if req.Version >= 3 {
		instance = req.InstanceID
	}
	m := g.members[req.MemberID]
	if code := g.checkInstanceLocked(req.MemberID, instance); code != errNone {
		return code, nil
	}
	if m == nil {
		return errUnknownMemberID, nil
	}
	if req.Generation != g.generation {
		return errIllegalGeneration, nil
	}
	if req.Version >= 5 {
		if req.ProtocolType != nil && *req.ProtocolType != g.protocolType ||
			req.Protocol != nil && *req.Protocol != g.protocol {
			return errInconsistentGroupProtocol, nil
		}
	}
	protocolType, protocol := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &protocolType, &protocol

	switch g.state {
	case statePreparingRebalance:
		return errRebalanceInProgress, nil
	case stateCompletingRebalance:
		delete(g.pendingSync, m.id)
		c.heartbeatLocked(g, m)
		if m.syncWaiter != nil {
			m.syncWaiter <- syncResult{errorCode: errRebalanceInProgress}
		}
		wait := make(chan syncResult, 1)
		m.syncWaiter, m.syncVersion = wait, req.Version
		if m.id == g.leader {
			c.assignLocked(g, req.GroupAssignment)
		}
		return errNone, wait
	case stateStable:
		// A late or repeated SyncGroup: the assignment is already settled.
		delete(g.pendingSync, m.id)
		c.heartbeatLocked(g, m)
		resp.MemberAssignment = m.assignment
		return errNone, nil
	default:
		return errUnknownMemberID, nil
	}
}

// assignLocked stores the leader's assignment, answers every waiting member
// and makes the group Stable. Members the leader left out get an empty
// assignment; entries for unknown members are ignored.
func (c *Coordinator) assignLocked(g *group, assignments []kmsg.SyncGroupRequestGroupAssignment) {
	for _, m := range g.members {
		m.assignment = nil
	}
	for _, a := range assignments {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = a.MemberAssignment
		}
	}
	for _, m := range g.members {
		if m.assignment == nil {
			m.assignment = []byte{}
		}
		if m.syncWaiter != nil {
			m.syncWaiter <- syncResult{assignment: m.assignment}
			m.syncWaiter = nil
		}
	}
	g.state = stateStable
	c.log.Info("group stable", "group", g.id, "generation", g.generation, "members", len(g.members))
	c.publishLocked(g)
}

// Heartbeat serves Heartbeat v0–v4: it keeps a member's session alive and
// tells it, with REBALANCE_IN_PROGRESS, when it must rejoin.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if !supported(keyHeartbeat, req.Version) {
		return errUnsupportedVersion
	}
	if !c.validGroupID(req.Group) {
		return errInvalidGroupID
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		if !c.coordinates(req.Group) {
			return errNotCoordinator
		}
		return errUnknownMemberID
	}
	defer g.mu.Unlock()
	var instance *string
	if req.Version >= 3 {
		instance = req.InstanceID
	}
	if code := g.checkInstanceLocked(req.MemberID, instance); code != errNone {
		return code
	}
	m := g.members[req.MemberID]
	if m == nil {
		return errUnknownMemberID
	}
	if g.state == stateEmpty {
		return errUnknownMemberID
	}
	if req.Generation != g.generation {
		return errIllegalGeneration
	}
	c.heartbeatLocked(g, m)
	if g.state == statePreparingRebalance {
		// The member is alive but must rejoin; its generation stays current
		// until the rebalance completes.
		return errRebalanceInProgress
	}
	return errNone
}

// LeaveGroup serves LeaveGroup v0–v5 (v3+ leave a batch of members, static
// members by instance ID). Each departure triggers a rebalance.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	if !supported(keyLeaveGroup, req.Version) {
		resp.ErrorCode = errUnsupportedVersion
		return resp
	}
	if !c.validGroupID(req.Group) {
		resp.ErrorCode = errInvalidGroupID
		return resp
	}
	leavers := req.Members
	if req.Version < 3 {
		leavers = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g := c.lockGroup(req.Group, false)
	if g == nil {
		resp.ErrorCode = errUnknownMemberID
		if !c.coordinates(req.Group) {
			resp.ErrorCode = errNotCoordinator
		}
		return resp
	}
	defer g.mu.Unlock()
	for _, l := range leavers {
		code := c.leaveLocked(g, l)
		if req.Version < 3 {
			resp.ErrorCode = code
			continue
		}
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.MemberID, l.InstanceID, code
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// leaveLocked removes one leaving member and returns its error code.
func (c *Coordinator) leaveLocked(g *group, l kmsg.LeaveGroupRequestMember) int16 {
	id := l.MemberID
	if l.InstanceID != nil {
		owner, ok := g.instances[*l.InstanceID]
		switch {
		case !ok:
			return errUnknownMemberID
		case id == "":
			id = owner // v3+: static members may leave by instance ID alone
		case owner != id:
			return errFencedInstanceID
		}
	}
	if _, ok := g.pending[id]; ok {
		c.stopTimer(g.pending[id].expiry)
		delete(g.pending, id)
		c.tryCompleteJoinLocked(g)
		return errNone
	}
	m := g.members[id]
	if m == nil {
		return errUnknownMemberID
	}
	c.log.Info("member left", "group", g.id, "member", id)
	c.removeMemberAndRebalanceLocked(g, m, "member "+id+" left")
	return errNone
}
