package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
)

// offsetEntry is one committed offset, stored as JSON at
// /consumers/<group>/offsets/<topic>/<partition>.
type offsetEntry struct {
	Offset          int64  `json:"offset"`
	LeaderEpoch     int32  `json:"leader_epoch"` // -1 when the client sent none (OffsetCommit < v6)
	Metadata        string `json:"metadata"`
	CommitTimestamp int64  `json:"commit_timestamp_ms"`
}

// lockGroupOffsets returns the named group with offsetMu held and its offsets
// loaded from the store, or nil (with the Kafka error code) when the
// coordinator is closed or loading failed. Groups are created on demand: an
// offsets-only group (simple consumers, or any group after a restart) exists
// in the store but not yet in memory. With fresh set, the cached offsets are
// read again if another broker claimed the group since this one did (see
// coordinatorPath).
func (c *Coordinator) lockGroupOffsets(id string, fresh bool) (*group, int16) {
	for {
		g := c.getGroup(id, true)
		if g == nil {
			return nil, errNotCoordinator
		}
		g.offsetMu.Lock()
		g.mu.Lock()
		dead := g.state == stateDead
		g.mu.Unlock()
		if dead {
			// Deleted between lookup and lock. Deletion holds offsetMu, so
			// once we hold it a live group stays live.
			g.offsetMu.Unlock()
			c.forgetGroup(g)
			continue
		}
		if err := c.loadOffsetsLocked(g, fresh); err != nil {
			g.offsetMu.Unlock()
			c.log.Error("loading committed offsets", "group", id, "err", err)
			return nil, errCoordinatorNotAvailable
		}
		return g, errNone
	}
}

// loadOffsetsLocked reads g's committed offsets from the store once, and
// again after the coordinator's view changed (another broker may have
// coordinated the group and taken commits meanwhile) or, with fresh set,
// after another broker claimed the group; the caller holds g.offsetMu. The
// store is the truth: the cache starts from it after every coordinator
// start. The group is claimed (Config.Owner) before the offsets are read.
func (c *Coordinator) loadOffsetsLocked(g *group, fresh bool) error {
	_, gen := c.owner(g.id)
	if g.offsetsLoaded && g.offsetsGen == gen && !(fresh && c.claimedElsewhere(g)) {
		return nil
	}
	if err := c.claimLocked(g, false); err != nil {
		return err
	}
	offsets := make(map[topicPartition]offsetEntry)
	topics, err := c.store.Children(offsetsPath(g.id))
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		return err
	}
	for _, escaped := range topics {
		topic, ok := coord.UnescapeName(escaped)
		if !ok {
			c.log.Warn("skipping undecodable topic node", "group", g.id, "node", escaped)
			continue
		}
		partitions, err := c.store.Children(offsetTopicPath(g.id, topic))
		if errors.Is(err, coord.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		for _, ps := range partitions {
			p, err := strconv.ParseInt(ps, 10, 32)
			if err != nil {
				c.log.Warn("skipping non-numeric partition node", "group", g.id, "topic", topic, "node", ps)
				continue
			}
			data, _, err := c.store.Get(offsetPath(g.id, topic, int32(p)))
			if errors.Is(err, coord.ErrNoNode) {
				continue
			}
			if err != nil {
				return err
			}
			var e offsetEntry
			if err := json.Unmarshal(data, &e); err != nil {
				c.log.Warn("skipping corrupt committed offset", "group", g.id, "topic", topic, "partition", p, "err", err)
				continue
			}
			offsets[topicPartition{topic, int32(p)}] = e
		}
	}
	pending, err := c.loadTxnOffsetsLocked(g)
	if err != nil {
		return err
	}
	g.offsets, g.txnOffsets, g.offsetsGen = offsets, pending, gen
	g.offsetsLoaded = true
	return nil
}

// OffsetCommit serves OffsetCommit v0–v9. A member of a group that uses the
// coordinator must commit with its current generation and member ID;
// generation -1 with no member ID is a "simple" commit (kadm, group reset),
// accepted while the group has no members. The accepted partitions of one
// request are written with one atomic store Multi. RetentionTimeMillis (v2–v4)
// is ignored: offsets expire after Config.OffsetsRetention (retention.go). A
// commit that would add a group beyond Config.MaxGroups gets
// GROUP_MAX_SIZE_REACHED.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
	}
	switch {
	case !supported(keyOffsetCommit, req.Version):
		setAll(errUnsupportedVersion)
	case !c.validGroupID(req.Group):
		setAll(errInvalidGroupID)
	default:
		c.commit(req, codes)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// commit validates and writes a commit, filling codes (indexed like
// req.Topics[i].Partitions[j]).
func (c *Coordinator) commit(req *kmsg.OffsetCommitRequest, codes [][]int16) {
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == errNone {
					codes[i][j] = code
				}
			}
		}
	}
	generation, memberID := req.Generation, req.MemberID
	var instance *string
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	if req.Version >= 7 {
		instance = req.InstanceID
	}
	if generation >= 0 {
		// A member commit to a group this coordinator does not know comes
		// from an older generation (or another coordinator): reject it
		// before creating anything.
		if g := c.getGroup(req.Group, false); g == nil {
			if !c.coordinates(req.Group) {
				setAll(errNotCoordinator)
			} else {
				setAll(errIllegalGeneration)
			}
			return
		}
	}
	if code := c.admitGroup(req.Group); code != errNone {
		setAll(code)
		return
	}
	g, code := c.lockGroupOffsets(req.Group, false)
	if code != errNone {
		setAll(code)
		return
	}
	defer g.offsetMu.Unlock()
	defer func() {
		// A commit that wrote nothing must not leave a group behind: it
		// would count against Config.MaxGroups for good.
		g.mu.Lock()
		c.releaseIfUnusedLocked(g)
		g.mu.Unlock()
	}()
	g.mu.Lock()
	code = c.validateCommitLocked(g, generation, memberID, instance)
	g.mu.Unlock()
	if code != errNone {
		setAll(code)
		return
	}

	now := c.cfg.Now().UnixMilli()
	updates := make(map[topicPartition]offsetEntry)
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			e, code := c.checkedEntry(t.Topic, p.Partition, p.Offset, p.Metadata, epoch, now)
			if code != errNone {
				codes[i][j] = code
				continue
			}
			if req.Version == 1 && p.Timestamp >= 0 {
				// Not after now: a commit time in the future would
				// hold off offsets.retention.minutes.
				e.CommitTimestamp = min(p.Timestamp, now)
			}
			updates[topicPartition{t.Topic, p.Partition}] = e
		}
	}
	if len(updates) == 0 {
		return
	}
	if err := c.writeOffsetsLocked(g, updates); err != nil {
		if errors.Is(err, errClaimedElsewhere) {
			c.log.Info("commit refused: another broker took up the group", "group", g.id)
			setAll(errNotCoordinator)
			return
		}
		c.log.Error("writing committed offsets", "group", g.id, "err", err)
		setAll(errCoordinatorNotAvailable)
		return
	}
}

// checkedEntry checks one partition of a commit (OffsetCommit or
// TxnOffsetCommit) and makes its entry, or answers the partition's error.
func (c *Coordinator) checkedEntry(topic string, partition int32, offset int64, metadata *string, leaderEpoch int32, now int64) (offsetEntry, int16) {
	switch {
	case metadata != nil && len(*metadata) > c.cfg.MaxMetadataBytes:
		return offsetEntry{}, errOffsetMetadataTooLarge
	case topic == "" || partition < 0 ||
		c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(topic, partition):
		return offsetEntry{}, errUnknownTopicOrPartition
	}
	e := offsetEntry{Offset: offset, LeaderEpoch: leaderEpoch, CommitTimestamp: now}
	if metadata != nil {
		e.Metadata = *metadata
	}
	return e, errNone
}

// validateCommitLocked applies Kafka's rules for who may commit.
func (c *Coordinator) validateCommitLocked(g *group, generation int32, memberID string, instance *string) int16 {
	if generation >= 0 || memberID != "" || instance != nil {
		if code := g.checkInstanceLocked(memberID, instance); code != errNone {
			return code
		}
		m := g.members[memberID]
		if m == nil {
			return errUnknownMemberID
		}
		if generation != g.generation {
			return errIllegalGeneration
		}
		if g.state == stateCompletingRebalance {
			// The member has its join response but not yet its assignment;
			// it should finish the rebalance first.
			return errRebalanceInProgress
		}
		c.heartbeatLocked(g, m)
		return errNone
	}
	if len(g.members) > 0 || g.state != stateEmpty {
		// Simple commits would race the members' own commits.
		return errUnknownMemberID
	}
	return errNone
}

// writeOffsetsLocked writes updates with one Multi (create or set per node)
// and then updates the cache; the caller holds g.offsetMu. A Multi that fails
// because the cache disagreed with the store reloads and retries once.
func (c *Coordinator) writeOffsetsLocked(g *group, updates map[topicPartition]offsetEntry) error {
	topics := make(map[string]bool)
	for tp := range updates {
		topics[tp.topic] = true
	}
	for topic := range topics {
		if err := coord.EnsurePath(c.store, offsetTopicPath(g.id, topic)); err != nil {
			return err
		}
	}
	if c.cfg.Owner != nil && g.fence == unfenced {
		// The group's first offsets in the store: claim it first.
		if err := c.claimLocked(g, true); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		ops := make([]coord.Op, 0, len(updates))
		for tp, e := range updates {
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			path := offsetPath(g.id, tp.topic, tp.partition)
			if _, ok := g.offsets[tp]; ok {
				ops = append(ops, coord.SetOp{Path: path, Data: data, Version: coord.AnyVersion})
			} else {
				ops = append(ops, coord.CreateOp{Path: path, Data: data, Mode: coord.Persistent})
			}
		}
		err := c.fencedMultiLocked(g, ops)
		if err == nil {
			break
		}
		if attempt == 0 && !errors.Is(err, errClaimedElsewhere) &&
			(errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode)) {
			g.offsetsLoaded = false
			if lerr := c.loadOffsetsLocked(g, false); lerr != nil {
				return fmt.Errorf("%w (reload: %v)", err, lerr)
			}
			continue
		}
		return err
	}
	for tp, e := range updates {
		g.offsets[tp] = e
	}
	return nil
}

// unfenced is group.fence while this broker has not claimed the group:
// always without Config.Owner, and otherwise while the group has nothing in
// the store.
const unfenced = -1

// errClaimedElsewhere fails an offset write that another broker's claim on
// the group fenced out.
var errClaimedElsewhere = errors.New("group: another broker took up the group")

// claimLocked makes this broker the group's fenced coordinator when
// Config.Owner is set (see coordinatorPath): it sets the group's coordinator node and keeps the
// new version. A group with no node in the store stays unfenced unless
// create is set (its first write). The caller holds g.offsetMu.
func (c *Coordinator) claimLocked(g *group, create bool) error {
	g.fence = unfenced
	if c.cfg.Owner == nil {
		return nil
	}
	path := coordinatorPath(g.id)
	for range 3 {
		st, err := c.store.Set(path, nil, coord.AnyVersion)
		if err == nil {
			g.fence = st.Version
			return nil
		}
		if !errors.Is(err, coord.ErrNoNode) {
			return fmt.Errorf("claiming the group: %w", err)
		}
		if create {
			if err := coord.EnsurePath(c.store, groupPath(g.id)); err != nil {
				return fmt.Errorf("claiming the group: %w", err)
			}
		}
		switch _, err := c.store.Create(path, nil, coord.Persistent); {
		case err == nil:
			g.fence = 0
			return nil
		case errors.Is(err, coord.ErrNoNode):
			return nil // the group has nothing in the store
		case !errors.Is(err, coord.ErrNodeExists):
			return fmt.Errorf("claiming the group: %w", err)
		}
		// Another broker created it meanwhile: set it in turn.
	}
	return errors.New("claiming the group: its coordinator node keeps changing")
}

// claimedElsewhere reports whether the group's coordinator node is not as
// this broker's claim left it (a store error counts: read again).
func (c *Coordinator) claimedElsewhere(g *group) bool {
	if c.cfg.Owner == nil {
		return false
	}
	ok, st, err := c.store.Exists(coordinatorPath(g.id))
	if err != nil {
		return true
	}
	if !ok {
		return g.fence != unfenced
	}
	return st.Version != g.fence
}

// fencedMultiLocked applies ops to the store, with Config.Owner only while
// this broker's claim on the group holds; a broken claim is errClaimedElsewhere
// and the cached offsets are read again before the next use.
func (c *Coordinator) fencedMultiLocked(g *group, ops []coord.Op) error {
	if g.fence != unfenced {
		// First: a Multi reports its first failing op, and a broken claim
		// must not pass for a stale cache (which is read again, claiming).
		ops = append([]coord.Op{coord.CheckOp{Path: coordinatorPath(g.id), Version: g.fence}}, ops...)
	}
	err := c.store.Multi(ops...)
	var me *coord.MultiError
	if g.fence != unfenced && errors.As(err, &me) && me.Index == 0 {
		g.offsetsLoaded = false
		return fmt.Errorf("%w: %w", errClaimedElsewhere, err)
	}
	return err
}

// OffsetFetch serves OffsetFetch v0–v9 (v8+ for several groups at once).
// Partitions without a committed offset answer offset -1; null topics (v2+)
// mean every committed partition. With RequireStable (v7+) a requested
// partition for which a transaction holds a pending offset (TxnOffsetCommit)
// answers UNSTABLE_OFFSET_COMMIT, which clients retry until the transaction
// completes; as in Kafka, a fetch of every partition does not check.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = req.Version
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group = rg.Group
			var requested map[string][]int32
			var order []string
			if rg.Topics != nil {
				requested = make(map[string][]int32)
				for _, t := range rg.Topics {
					order = append(order, t.Topic)
					requested[t.Topic] = append(requested[t.Topic], t.Partitions...)
				}
			}
			topics, code := c.fetchOffsets(req.Version, rg.Group, order, requested, req.RequireStable)
			out.ErrorCode = code
			for _, t := range topics {
				ot := kmsg.NewOffsetFetchResponseGroupTopic()
				ot.Topic = t.Topic
				for _, p := range t.Partitions {
					op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					op.Partition, op.Offset, op.LeaderEpoch = p.Partition, p.Offset, p.LeaderEpoch
					op.Metadata, op.ErrorCode = p.Metadata, p.ErrorCode
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			resp.Groups = append(resp.Groups, out)
		}
		return resp
	}
	var requested map[string][]int32
	var order []string
	if req.Topics != nil || req.Version < 2 {
		requested = make(map[string][]int32)
		for _, t := range req.Topics {
			order = append(order, t.Topic)
			requested[t.Topic] = append(requested[t.Topic], t.Partitions...)
		}
	}
	topics, code := c.fetchOffsets(req.Version, req.Group, order, requested, req.Version >= 7 && req.RequireStable)
	resp.Topics = topics
	if req.Version >= 2 {
		resp.ErrorCode = code
	}
	return resp
}

// fetchOffsets answers one group's fetch. requested nil means every committed
// partition; order keeps the requested topic order. A group-level failure is
// also copied into every partition, which is where v0–v1 clients look.
func (c *Coordinator) fetchOffsets(version int16, groupID string, order []string, requested map[string][]int32, requireStable bool) ([]kmsg.OffsetFetchResponseTopic, int16) {
	code := errNone
	var offsets map[topicPartition]offsetEntry
	unstable := make(map[topicPartition]bool)
	switch {
	case !supported(keyOffsetFetch, version):
		code = errUnsupportedVersion
	case !c.validGroupID(groupID):
		code = errInvalidGroupID
	default:
		g, lcode := c.lockGroupOffsets(groupID, true)
		if lcode != errNone {
			code = lcode
			break
		}
		offsets = make(map[topicPartition]offsetEntry, len(g.offsets))
		for tp, e := range g.offsets {
			offsets[tp] = e
		}
		if requireStable && requested != nil {
			for topic, ps := range requested {
				for _, p := range ps {
					tp := topicPartition{topic, p}
					unstable[tp] = g.hasPendingLocked(tp)
				}
			}
		}
		g.mu.Lock()
		c.releaseIfUnusedLocked(g)
		g.mu.Unlock()
		g.offsetMu.Unlock()
	}
	if requested == nil {
		byTopic := make(map[string][]int32)
		for tp := range offsets {
			if _, ok := byTopic[tp.topic]; !ok {
				order = append(order, tp.topic)
			}
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
		}
		sort.Strings(order)
		for _, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		}
		requested = byTopic
	}
	var out []kmsg.OffsetFetchResponseTopic
	seen := make(map[string]bool)
	for _, topic := range order {
		if seen[topic] {
			continue
		}
		seen[topic] = true
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = topic
		for _, p := range requested[topic] {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition = p
			e, ok := offsets[topicPartition{topic, p}]
			if !ok {
				e = offsetEntry{Offset: -1, LeaderEpoch: -1}
			}
			rp.ErrorCode = code
			if code == errNone && unstable[topicPartition{topic, p}] {
				e, rp.ErrorCode = offsetEntry{Offset: -1, LeaderEpoch: -1}, errUnstableOffsetCommit
			}
			metadata := e.Metadata
			rp.Offset, rp.LeaderEpoch, rp.Metadata = e.Offset, e.LeaderEpoch, &metadata
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out, code
}

// OffsetDelete serves OffsetDelete v0: it removes committed offsets of topics
// the group does not consume (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.Version
	codes := make(map[topicPartition]int16)
	resp.ErrorCode = c.deleteOffsets(req, codes)
	if resp.ErrorCode == errNone {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[topicPartition{t.Topic, p.Partition}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

// deleteOffsets does the work of OffsetDelete, filling per-partition codes and
// returning the group-level code.
func (c *Coordinator) deleteOffsets(req *kmsg.OffsetDeleteRequest, codes map[topicPartition]int16) int16 {
	if !supported(keyOffsetDelete, req.Version) {
		return errUnsupportedVersion
	}
	if !c.validGroupID(req.Group) {
		return errInvalidGroupID
	}
	g, code := c.lockGroupOffsets(req.Group, false)
	if code != errNone {
		return code
	}
	defer g.offsetMu.Unlock()
	g.mu.Lock()
	exists := g.existsLocked()
	subscribed, known := g.subscribedTopicsLocked()
	c.releaseIfUnusedLocked(g)
	g.mu.Unlock()
	if !exists {
		return errGroupIDNotFound
	}
	if !known {
		return errNonEmptyGroup
	}
	var ops []coord.Op
	var deleted, pendingGone []topicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			switch {
			case subscribed[t.Topic]:
				codes[tp] = errGroupSubscribedToTopic
			case c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition):
				codes[tp] = errUnknownTopicOrPartition
			default:
				if _, ok := g.offsets[tp]; ok {
					ops = append(ops, coord.DeleteOp{Path: offsetPath(g.id, tp.topic, tp.partition), Version: coord.AnyVersion})
					deleted = append(deleted, tp)
				}
				if g.hasPendingLocked(tp) {
					pendingGone = append(pendingGone, tp)
				}
			}
		}
	}
	// Pending transactional offsets of those partitions go too, as in
	// Kafka; a producer left with none is no longer indexed for the group.
	txnOps, remaining, err := c.dropPendingOpsLocked(g, pendingGone)
	if err != nil {
		c.log.Error("deleting pending transactional offsets", "group", g.id, "err", err)
		for _, tp := range append(deleted, pendingGone...) {
			codes[tp] = errUnknownServerError
		}
		return errNone
	}
	ops = append(ops, txnOps...)
	if len(ops) == 0 {
		return errNone
	}
	if err := c.fencedMultiLocked(g, ops); err != nil {
		code := errCoordinatorNotAvailable
		if errors.Is(err, errClaimedElsewhere) {
			code = errNotCoordinator
		} else {
			c.log.Error("deleting committed offsets", "group", g.id, "err", err)
		}
		for _, tp := range append(deleted, pendingGone...) {
			codes[tp] = code
		}
		// The cache may now disagree with the store; read it again next time.
		g.offsetsLoaded = false
		return errNone
	}
	for _, tp := range deleted {
		delete(g.offsets, tp)
	}
	c.applyDroppedPendingLocked(g, remaining)
	return errNone
}

// releaseIfUnusedLocked drops a group object that was made only to answer a
// lookup (no members, no pending joins, no offsets), so lookups of arbitrary
// names do not accumulate. It is marked Dead first: anyone who fetched the
// object meanwhile sees that after locking and takes a fresh one. The caller
// holds g.offsetMu and g.mu.
func (c *Coordinator) releaseIfUnusedLocked(g *group) {
	if g.existsLocked() || len(g.pending) > 0 {
		return
	}
	g.state = stateDead
	c.forgetGroup(g)
}
