package group

import (
	"context"
	"errors"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
)

// classicGroupType is the group type of every millrace group (ListGroups v5,
// KIP-848): only the classic protocol is served.
const classicGroupType = "classic"

// DescribeGroups serves DescribeGroups v0–v6: state, protocol and members with
// their metadata and assignment. An unknown group is reported Dead, or with
// GROUP_ID_NOT_FOUND from v6 (KIP-1043).
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.State = stateDead.String()
		rg.AuthorizedOperations = -2147483648 // "not requested / unknown", Kafka's INT32_MIN
		switch {
		case !supported(keyDescribeGroups, req.Version):
			rg.ErrorCode = errUnsupportedVersion
		case !c.validGroupID(id):
			rg.ErrorCode = errInvalidGroupID
		default:
			rg.ErrorCode = c.describe(id, &rg)
			if rg.ErrorCode == errGroupIDNotFound && req.Version < 6 {
				rg.ErrorCode = errNone // older versions say Dead without an error
			}
		}
		if rg.ErrorCode != errNone && req.Version >= 6 {
			msg := errorMessage(rg.ErrorCode, id)
			rg.ErrorMessage = &msg
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// describe fills rg for one group and returns its error code.
func (c *Coordinator) describe(id string, rg *kmsg.DescribeGroupsResponseGroup) int16 {
	g, code := c.lockGroupOffsets(id, false)
	if code != errNone {
		return code
	}
	defer g.offsetMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.existsLocked() {
		c.releaseIfUnusedLocked(g)
		return errGroupIDNotFound
	}
	rg.State = g.state.String()
	rg.ProtocolType = g.protocolType
	if g.state == stateStable || g.state == stateCompletingRebalance {
		rg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembersLocked() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.InstanceID = m.id, m.instanceID
		rm.ClientID, rm.ClientHost = m.clientID, m.clientHost
		// Kafka shows metadata and assignment only once a protocol is chosen.
		if g.state == stateStable || g.state == stateCompletingRebalance {
			rm.ProtocolMetadata = m.metadataFor(g.protocol)
		}
		if g.state == stateStable {
			rm.MemberAssignment = m.assignment
		}
		rg.Members = append(rg.Members, rm)
	}
	return errNone
}

// errorMessage is the human-readable text sent with an error code (v6+).
func errorMessage(code int16, group string) string {
	switch code {
	case errGroupIDNotFound:
		return "group " + group + " not found"
	case errInvalidGroupID:
		return "the group ID is empty or longer than millrace.group.id.max.bytes"
	case errGroupMaxSizeReached:
		return "the coordinator holds millrace.max.groups groups and takes no new one"
	case errNonEmptyGroup:
		return "group " + group + " has members; only an empty group can be deleted"
	case errCoordinatorNotAvailable:
		return "the coordination store is unavailable"
	case errNotCoordinator:
		return "this broker does not coordinate group " + group + " (or is shutting down); find its coordinator again"
	case errUnsupportedVersion:
		return "unsupported request version"
	default:
		return "group " + group + ": error " + strconv.Itoa(int(code))
	}
}

// ListGroups serves ListGroups v0–v5: every group this broker coordinates
// (Config.Owner; clients ask every broker, as in Kafka) with members or
// committed offsets, including groups known only from the store (their
// protocol type is then unknown and reported empty, as for simple consumer
// groups). v4 filters by state and v5 by type ("classic"; case-insensitive,
// as Kafka).
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = req.Version
	if !supported(keyListGroups, req.Version) {
		resp.ErrorCode = errUnsupportedVersion
		return resp
	}
	if c.closed.Load() {
		resp.ErrorCode = errNotCoordinator
		return resp
	}
	states := make(map[string]bool)
	if req.Version >= 4 {
		for _, s := range req.StatesFilter {
			states[lower(s)] = true
		}
	}
	if req.Version >= 5 && len(req.TypesFilter) > 0 {
		ok := false
		for _, t := range req.TypesFilter {
			ok = ok || lower(t) == classicGroupType
		}
		if !ok {
			return resp
		}
	}

	listed := make(map[string]listedGroup)
	stored, err := c.store.Children(consumersRoot)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		c.log.Error("listing stored groups", "err", err)
		resp.ErrorCode = errCoordinatorNotAvailable
		return resp
	}
	for _, escaped := range stored {
		id, ok := coord.UnescapeName(escaped)
		if !ok {
			continue
		}
		// Only groups with committed offsets (pending transactional ones
		// included) count; ids/owners mirrors of a group are ephemeral and
		// follow its in-memory state.
		for _, path := range []string{offsetsPath(id), txnOffsetsPath(id)} {
			if children, err := c.store.Children(path); err == nil && len(children) > 0 {
				listed[id] = listedGroup{Group: id, State: stateEmpty.String()}
				break
			}
		}
	}
	c.mu.Lock()
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.offsetMu.Lock()
		g.mu.Lock()
		switch {
		case g.state == stateDead:
			delete(listed, g.id)
		case g.existsLocked():
			listed[g.id] = listedGroup{Group: g.id, ProtocolType: g.protocolType, State: g.state.String()}
		}
		g.mu.Unlock()
		g.offsetMu.Unlock()
	}

	ids := make([]string, 0, len(listed))
	for id := range listed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		l := listed[id]
		if owned, _ := c.owner(id); !owned || (len(states) > 0 && !states[lower(l.State)]) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = l.Group, l.ProtocolType, l.State, classicGroupType
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// listedGroup is one group as ListGroups reports it.
type listedGroup struct {
	Group        string
	ProtocolType string
	State        string
}

func lower(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}

// DeleteGroups serves DeleteGroups v0–v3: an Empty group's committed offsets,
// pending transactional ones included, and store subtree /consumers/<group>
// are removed; a group with members gets
// NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		switch {
		case !supported(keyDeleteGroups, req.Version):
			rg.ErrorCode = errUnsupportedVersion
		case !c.validGroupID(id):
			rg.ErrorCode = errInvalidGroupID
		default:
			rg.ErrorCode = c.deleteGroup(id)
		}
		if rg.ErrorCode != errNone && req.Version >= 3 {
			msg := errorMessage(rg.ErrorCode, id)
			rg.ErrorMessage = &msg
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(id string) int16 {
	g, code := c.lockGroupOffsets(id, false)
	if code != errNone {
		return code
	}
	defer g.offsetMu.Unlock()
	g.mu.Lock()
	if g.state != stateEmpty {
		g.mu.Unlock()
		return errNonEmptyGroup
	}
	if !g.existsLocked() {
		c.releaseIfUnusedLocked(g)
		g.mu.Unlock()
		return errGroupIDNotFound
	}
	// Dead first, so that no join or commit uses this object while the
	// subtree is removed (they find a fresh group instead).
	g.state = stateDead
	c.stopTimersLocked(g)
	g.mu.Unlock()
	c.forgetGroup(g)
	pending := g.txnOffsets
	g.offsets, g.txnOffsets = make(map[topicPartition]offsetEntry), make(map[int64]*pendingTxnOffsets)
	if err := deleteRecursive(c.store, groupPath(id)); err != nil {
		c.log.Error("deleting group from the store", "group", id, "err", err)
		return errCoordinatorNotAvailable
	}
	// Pending transactional offsets went with the group, as in Kafka (their
	// marker later finds nothing to complete).
	c.dropTxnIndexLocked(g, pending)
	c.log.Info("group deleted", "group", id)
	return errNone
}
