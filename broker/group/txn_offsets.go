package group

// Transactional offset commits (KIP-98, with KIP-447's member checks).
//
// A transactional producer commits its consumer group's offsets with
// TxnOffsetCommit inside its transaction; they stay pending, invisible to
// OffsetFetch, until the transaction coordinator's marker completes them:
// commit makes them the group's committed offsets, abort drops them. Kafka
// keeps them in the __consumer_offsets partition of the group, with the
// producer's batches; millrace keeps them in the coordination store beside
// the group's committed offsets, written with the same fence (the version
// of /consumers/<group>/coordinator), so a former coordinator's late write
// fails here as it does for plain commits:
//
//	/consumers/<group>/txn-offsets/<producer ID>  persistent: pendingTxnOffsets JSON
//	/txn-offsets/<producer ID>                    persistent: {"producer_epoch":N}, the highest epoch seen
//	/txn-offsets/<producer ID>/<group>            persistent, empty: the group holds pending offsets of the producer
//
// The marker names only the producer and the __consumer_offsets partition
// of the group (Partition), not the group: the index by producer ID finds
// the groups, so any broker can complete them, including one that took the
// group over after the TxnOffsetCommit. An index entry is made and removed
// in the same Multi as the pending node, so every pending node is indexed.
//
// The index node's epoch plays the part of Kafka's producer state on the
// __consumer_offsets partition: a marker raises it, and a TxnOffsetCommit
// with an older epoch (a zombie producer, or one whose transaction the
// coordinator aborted with a bumped epoch) gets INVALID_PRODUCER_EPOCH
// instead of leaving offsets no marker will ever complete. An index node
// without groups is deleted once unchanged for producer.id.expiration.ms,
// as Kafka forgets an idle producer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
)

// txnIndexRoot is the root of the index of pending transactional offsets
// by producer ID.
const txnIndexRoot = "/txn-offsets"

// maxPendingNodeBytes bounds one producer's pending offsets in one group,
// encoded: below ZooKeeper's default jute.maxbuffer (1 MiB), which refuses
// larger nodes. A TxnOffsetCommit that would pass it gets
// INVALID_COMMIT_OFFSET_SIZE, Kafka's answer to a commit too large for its
// log. About 5,000 partitions with short metadata fit.
const maxPendingNodeBytes = 512 << 10

// offsetsTopicPartitions is Kafka's default offsets.topic.num.partitions: the
// number of __consumer_offsets partitions a group ID is hashed over.
const offsetsTopicPartitions = 50

func txnOffsetsPath(group string) string { return groupPath(group) + "/txn-offsets" }

func txnOffsetsProducerPath(group string, producerID int64) string {
	return txnOffsetsPath(group) + "/" + strconv.FormatInt(producerID, 10)
}

func txnIndexPath(producerID int64) string {
	return txnIndexRoot + "/" + strconv.FormatInt(producerID, 10)
}

func txnIndexGroupPath(producerID int64, group string) string {
	return txnIndexPath(producerID) + "/" + coord.EscapeName(group)
}

// Partition returns the __consumer_offsets partition Kafka assigns group ID
// groupID: abs(Java's String.hashCode) modulo 50 (offsets.topic.num.partitions'
// default). Transaction markers for a group's offsets name this partition.
func Partition(groupID string) int32 {
	// String.hashCode runs over UTF-16 code units, with int32 overflow.
	var h int32
	for _, u := range utf16.Encode([]rune(groupID)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		return 0 // Kafka's Utils.abs maps MIN_VALUE to 0
	}
	if h < 0 {
		h = -h
	}
	return h % offsetsTopicPartitions
}

// pendingTxnOffsets is one producer's pending offsets in one group, stored
// as JSON at /consumers/<group>/txn-offsets/<producer ID>.
type pendingTxnOffsets struct {
	ProducerID    int64              `json:"producer_id"`
	ProducerEpoch int16              `json:"producer_epoch"`
	Offsets       []pendingTxnOffset `json:"offsets"`
}

// pendingTxnOffset is one partition's pending offset.
type pendingTxnOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	offsetEntry
}

// lookup returns the pending offset of tp.
func (p *pendingTxnOffsets) lookup(tp topicPartition) (offsetEntry, bool) {
	for _, o := range p.Offsets {
		if o.Topic == tp.topic && o.Partition == tp.partition {
			return o.offsetEntry, true
		}
	}
	return offsetEntry{}, false
}

// merged returns p with updates applied (a later commit of a partition in
// the same transaction replaces the earlier), sorted for a stable encoding.
func (p *pendingTxnOffsets) merged(epoch int16, updates map[topicPartition]offsetEntry) *pendingTxnOffsets {
	all := make(map[topicPartition]offsetEntry, len(p.Offsets)+len(updates))
	for _, o := range p.Offsets {
		all[topicPartition{o.Topic, o.Partition}] = o.offsetEntry
	}
	for tp, e := range updates {
		all[tp] = e
	}
	out := &pendingTxnOffsets{ProducerID: p.ProducerID, ProducerEpoch: epoch}
	for tp, e := range all {
		out.Offsets = append(out.Offsets, pendingTxnOffset{Topic: tp.topic, Partition: tp.partition, offsetEntry: e})
	}
	sort.Slice(out.Offsets, func(i, j int) bool {
		a, b := out.Offsets[i], out.Offsets[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out
}

// hasPendingLocked reports whether any transaction holds a pending offset
// for tp; the caller holds g.offsetMu.
func (g *group) hasPendingLocked(tp topicPartition) bool {
	for _, p := range g.txnOffsets {
		if _, ok := p.lookup(tp); ok {
			return true
		}
	}
	return false
}

// loadTxnOffsetsLocked reads g's pending transactional offsets from the
// store; the caller holds g.offsetMu and loads the committed ones with them.
func (c *Coordinator) loadTxnOffsetsLocked(g *group) (map[int64]*pendingTxnOffsets, error) {
	out := make(map[int64]*pendingTxnOffsets)
	producers, err := c.store.Children(txnOffsetsPath(g.id))
	if errors.Is(err, coord.ErrNoNode) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, name := range producers {
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			c.log.Warn("skipping non-numeric producer node", "group", g.id, "node", name)
			continue
		}
		data, _, err := c.store.Get(txnOffsetsProducerPath(g.id, id))
		if errors.Is(err, coord.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var p pendingTxnOffsets
		if err := json.Unmarshal(data, &p); err != nil || p.ProducerID != id {
			c.log.Warn("skipping corrupt pending transactional offsets", "group", g.id, "producer_id", id, "err", err)
			continue
		}
		out[id] = &p
	}
	return out, nil
}

// TxnOffsetCommit serves TxnOffsetCommit v0–v3: it records offsets that
// become the group's committed offsets when the producer's transaction
// commits (CompleteTxnOffsets). From v3 a member of the group commits with
// its generation, member ID and instance ID (KIP-447), checked as
// OffsetCommit checks them, except that a rebalance in progress does not
// refuse it and that a commit without a member is accepted whatever the
// group's state (older producers know no member), as in Kafka. The wire
// server checks ACLs and partition existence first.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = req.Version
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	code := errNone
	switch {
	case !supported(keyTxnOffsetCommit, req.Version):
		code = errUnsupportedVersion
	case !c.validGroupID(req.Group):
		code = errInvalidGroupID
	case req.ProducerID < 0 || req.ProducerEpoch < 0:
		code = errInvalidProducerEpoch
	default:
		code = c.txnCommit(req, codes)
	}
	for i, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			if code != errNone {
				rp.ErrorCode = code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// txnCommit validates and writes a transactional commit; it returns a code
// for every partition, or fills codes per partition and returns errNone.
func (c *Coordinator) txnCommit(req *kmsg.TxnOffsetCommitRequest, codes [][]int16) int16 {
	generation, memberID, instance := int32(-1), "", (*string)(nil)
	if req.Version >= 3 {
		generation, memberID, instance = req.Generation, req.MemberID, req.InstanceID
	}
	if code := c.admitGroup(req.Group); code != errNone {
		return code
	}
	g, code := c.lockGroupOffsets(req.Group, false)
	if code != errNone {
		return code
	}
	defer g.offsetMu.Unlock()
	defer func() {
		g.mu.Lock()
		c.releaseIfUnusedLocked(g)
		g.mu.Unlock()
	}()
	if generation >= 0 || memberID != "" || instance != nil {
		g.mu.Lock()
		code := g.checkInstanceLocked(memberID, instance)
		switch {
		case code != errNone:
		case g.members[memberID] == nil:
			code = errUnknownMemberID
		case generation != g.generation:
			code = errIllegalGeneration
		}
		g.mu.Unlock()
		if code != errNone {
			return code
		}
	}
	if p := g.txnOffsets[req.ProducerID]; p != nil && req.ProducerEpoch < p.ProducerEpoch {
		return errInvalidProducerEpoch
	}

	now := c.cfg.Now().UnixMilli()
	updates := make(map[topicPartition]offsetEntry)
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			epoch := int32(-1)
			if req.Version >= 2 {
				epoch = p.LeaderEpoch
			}
			e, code := c.checkedEntry(t.Topic, p.Partition, p.Offset, p.Metadata, epoch, now)
			if code != errNone {
				codes[i][j] = code
				continue
			}
			updates[topicPartition{t.Topic, p.Partition}] = e
		}
	}
	if len(updates) == 0 {
		return errNone
	}
	if code := c.writeTxnOffsetsLocked(g, req.ProducerID, req.ProducerEpoch, updates); code != errNone {
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if _, ok := updates[topicPartition{t.Topic, p.Partition}]; ok {
					codes[i][j] = code
				}
			}
		}
	}
	return errNone
}

// writeTxnOffsetsLocked adds updates to the producer's pending offsets in g:
// the producer's epoch is checked against (and raised in) its index node
// first, then the pending node and the group's index entry are written in
// one Multi with the group's fence. The caller holds g.offsetMu.
func (c *Coordinator) writeTxnOffsetsLocked(g *group, producerID int64, epoch int16, updates map[topicPartition]offsetEntry) int16 {
	old := g.txnOffsets[producerID]
	if old == nil {
		old = &pendingTxnOffsets{ProducerID: producerID}
	}
	next := old.merged(epoch, updates)
	data, err := json.Marshal(next)
	if err != nil {
		c.log.Error("encoding pending transactional offsets", "group", g.id, "err", err)
		return errUnknownServerError
	}
	if len(data) > maxPendingNodeBytes {
		return errInvalidCommitOffsetSize
	}
	fenced, err := c.raiseIndexEpoch(producerID, epoch)
	if err != nil {
		c.log.Error("indexing pending transactional offsets", "group", g.id, "producer_id", producerID, "err", err)
		return errCoordinatorNotAvailable
	}
	if fenced {
		return errInvalidProducerEpoch
	}
	if err := coord.EnsurePath(c.store, txnOffsetsPath(g.id)); err != nil {
		c.log.Error("writing pending transactional offsets", "group", g.id, "err", err)
		return errCoordinatorNotAvailable
	}
	if c.cfg.Owner != nil && g.fence == unfenced {
		if err := c.claimLocked(g, true); err != nil {
			c.log.Error("writing pending transactional offsets", "group", g.id, "err", err)
			return errCoordinatorNotAvailable
		}
	}
	// The index entry is made with the pending node, in one Multi: a
	// completion on another broker removes it only after its own Multi,
	// which this broker's claim check orders before or after this one.
	var ops []coord.Op
	indexPath := txnIndexGroupPath(producerID, g.id)
	switch indexed, _, err := c.store.Exists(indexPath); {
	case err != nil:
		c.log.Error("indexing pending transactional offsets", "group", g.id, "producer_id", producerID, "err", err)
		return errCoordinatorNotAvailable
	case !indexed:
		ops = append(ops, coord.CreateOp{Path: indexPath, Mode: coord.Persistent})
	}
	path := txnOffsetsProducerPath(g.id, producerID)
	if g.txnOffsets[producerID] != nil {
		ops = append(ops, coord.SetOp{Path: path, Data: data, Version: coord.AnyVersion})
	} else {
		ops = append(ops, coord.CreateOp{Path: path, Data: data, Mode: coord.Persistent})
	}
	if err := c.fencedMultiLocked(g, ops); err != nil {
		// Whatever failed, the cache may disagree with the store: read it
		// again before the next use; the producer retries.
		g.offsetsLoaded = false
		if errors.Is(err, errClaimedElsewhere) {
			c.log.Info("transactional commit refused: another broker took up the group", "group", g.id)
			return errNotCoordinator
		}
		c.log.Error("writing pending transactional offsets", "group", g.id, "err", err)
		return errCoordinatorNotAvailable
	}
	g.txnOffsets[producerID] = next
	return errNone
}

// txnIndexNode is the data of /txn-offsets/<producer ID>.
type txnIndexNode struct {
	ProducerEpoch int16 `json:"producer_epoch"`
}

// raiseIndexEpoch makes the producer's index node hold at least epoch,
// creating it; fenced reports that it held a newer one (left as it is).
func (c *Coordinator) raiseIndexEpoch(producerID int64, epoch int16) (fenced bool, err error) {
	path := txnIndexPath(producerID)
	want, err := json.Marshal(txnIndexNode{ProducerEpoch: epoch})
	if err != nil {
		return false, err
	}
	for range 5 {
		data, st, err := c.store.Get(path)
		if errors.Is(err, coord.ErrNoNode) {
			if err := coord.EnsurePath(c.store, txnIndexRoot); err != nil {
				return false, err
			}
			_, err = c.store.Create(path, want, coord.Persistent)
			if errors.Is(err, coord.ErrNodeExists) {
				continue
			}
			return false, err
		}
		if err != nil {
			return false, err
		}
		var n txnIndexNode
		if err := json.Unmarshal(data, &n); err != nil {
			c.log.Warn("replacing a corrupt transactional offsets index node", "producer_id", producerID, "err", err)
			n.ProducerEpoch = -1
		}
		switch {
		case epoch < n.ProducerEpoch:
			return true, nil
		case epoch == n.ProducerEpoch:
			return false, nil
		}
		_, err = c.store.Set(path, want, st.Version)
		if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNoNode) {
			continue // changed meanwhile: look again
		}
		return false, err
	}
	return false, fmt.Errorf("group: the index node of producer %d keeps changing", producerID)
}

// CompleteTxnOffsets completes the pending offsets of the producer's
// transaction in every group hashed to __consumer_offsets partition
// partition (Partition): commit makes them the groups' committed offsets,
// visible to OffsetFetch, and abort drops them. The WriteTxnMarkers handler
// calls it for a marker on topic "__consumer_offsets". It answers a Kafka
// error code: NONE (also when nothing was pending: a repeated marker is
// harmless), INVALID_PRODUCER_EPOCH for a marker older than the producer's
// pending offsets or than a marker already seen, COORDINATOR_NOT_AVAILABLE
// or NOT_COORDINATOR when the store refused (the sender retries).
//
// Groups are found through the index by producer ID, so the broker that
// receives the marker completes them even when it took the group over after
// the TxnOffsetCommit, or does not coordinate it at all: the write carries
// the group's fence like any offset write, and the group's coordinator
// reads the offsets again after it.
func (c *Coordinator) CompleteTxnOffsets(ctx context.Context, producerID int64, epoch int16, commit bool, partition int32) int16 {
	if c.closed.Load() {
		return errNotCoordinator
	}
	groups, err := c.store.Children(txnIndexPath(producerID))
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		c.log.Error("reading the transactional offsets index", "producer_id", producerID, "err", err)
		return errCoordinatorNotAvailable
	}
	sort.Strings(groups)
	result := errNone
	for _, escaped := range groups {
		id, ok := coord.UnescapeName(escaped)
		if !ok || Partition(id) != partition {
			continue
		}
		if code := c.completeGroup(id, producerID, epoch, commit); code != errNone {
			result = code
		}
	}
	if result != errNone {
		return result
	}
	// The marker's epoch fences later commits of an older epoch, as the
	// marker does in Kafka's producer state.
	fenced, err := c.raiseIndexEpoch(producerID, epoch)
	if err != nil {
		c.log.Error("recording a transaction marker's epoch", "producer_id", producerID, "err", err)
		return errCoordinatorNotAvailable
	}
	if fenced {
		return errInvalidProducerEpoch
	}
	return errNone
}

// completeGroup completes the producer's pending offsets in group id.
func (c *Coordinator) completeGroup(id string, producerID int64, epoch int16, commit bool) int16 {
	g, code := c.lockGroupOffsets(id, true)
	if code == errNotCoordinator && !c.closed.Load() {
		// Coordinated elsewhere (or moving): work on a group object of our
		// own, fenced like the coordinator's writes.
		g = newGroup(id)
		g.offsetMu.Lock()
		if err := c.loadOffsetsLocked(g, false); err != nil {
			g.offsetMu.Unlock()
			c.log.Error("loading committed offsets", "group", id, "err", err)
			return errCoordinatorNotAvailable
		}
		code = errNone
	}
	if code != errNone {
		return code
	}
	defer g.offsetMu.Unlock()
	code = c.completeGroupLocked(g, producerID, epoch, commit)
	if owned, _ := c.owner(id); owned {
		g.mu.Lock()
		c.releaseIfUnusedLocked(g)
		g.mu.Unlock()
	}
	return code
}

// completeGroupLocked applies the marker to g; the caller holds g.offsetMu.
// A committed offset is replaced unless a plain commit of the same
// partition came after the transactional one (Kafka keeps the later write,
// by position in its log; here by commit time).
func (c *Coordinator) completeGroupLocked(g *group, producerID int64, epoch int16, commit bool) int16 {
	for attempt := 0; ; attempt++ {
		p := g.txnOffsets[producerID]
		if p == nil {
			// Completed before, or the group was deleted meanwhile.
			return c.unindexIfIdleLocked(g, producerID)
		}
		if p.ProducerEpoch > epoch {
			return errInvalidProducerEpoch
		}
		ops := []coord.Op{coord.DeleteOp{Path: txnOffsetsProducerPath(g.id, producerID), Version: coord.AnyVersion}}
		// The index entry goes with the pending node (made with it too).
		indexPath := txnIndexGroupPath(producerID, g.id)
		switch indexed, _, err := c.store.Exists(indexPath); {
		case err != nil:
			c.log.Error("completing transactional offsets", "group", g.id, "err", err)
			return errCoordinatorNotAvailable
		case indexed:
			ops = append(ops, coord.DeleteOp{Path: indexPath, Version: coord.AnyVersion})
		}
		updates := make(map[topicPartition]offsetEntry)
		for _, o := range p.Offsets {
			if !commit {
				break // an abort only drops them
			}
			tp := topicPartition{o.Topic, o.Partition}
			current, ok := g.offsets[tp]
			if ok && current.CommitTimestamp > o.CommitTimestamp {
				continue
			}
			updates[tp] = o.offsetEntry
			data, err := json.Marshal(o.offsetEntry)
			if err != nil {
				c.log.Error("encoding a committed offset", "group", g.id, "err", err)
				return errUnknownServerError
			}
			path := offsetPath(g.id, tp.topic, tp.partition)
			if ok {
				ops = append(ops, coord.SetOp{Path: path, Data: data, Version: coord.AnyVersion})
			} else {
				if err := coord.EnsurePath(c.store, offsetTopicPath(g.id, tp.topic)); err != nil {
					c.log.Error("completing transactional offsets", "group", g.id, "err", err)
					return errCoordinatorNotAvailable
				}
				ops = append(ops, coord.CreateOp{Path: path, Data: data, Mode: coord.Persistent})
			}
		}
		err := c.fencedMultiLocked(g, ops)
		if err == nil {
			for tp, e := range updates {
				g.offsets[tp] = e
			}
			delete(g.txnOffsets, producerID)
			return errNone
		}
		g.offsetsLoaded = false
		if attempt == 0 {
			// A stale cache or another broker's claim: read the store again
			// (claiming the group) and retry once.
			if lerr := c.loadOffsetsLocked(g, false); lerr == nil {
				continue
			}
		}
		c.log.Error("completing transactional offsets", "group", g.id, "producer_id", producerID, "err", err)
		if errors.Is(err, errClaimedElsewhere) {
			return errNotCoordinator
		}
		return errCoordinatorNotAvailable
	}
}

// unindexIfIdleLocked removes the group's index entry of a producer that
// holds no pending offsets in g (an entry left by a group deleted
// meanwhile); the caller holds g.offsetMu.
func (c *Coordinator) unindexIfIdleLocked(g *group, producerID int64) int16 {
	if err := c.store.Delete(txnIndexGroupPath(producerID, g.id), coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
		c.log.Warn("removing a transactional offsets index entry", "group", g.id, "producer_id", producerID, "err", err)
	}
	return errNone
}

// dropPendingOpsLocked returns the store operations that remove the pending
// offsets of partitions gone from every producer's pending offsets in g,
// and what each affected producer has left (nil: nothing, its node is
// deleted). The caller applies remaining with applyDroppedPendingLocked once
// the operations succeeded; it holds g.offsetMu.
func (c *Coordinator) dropPendingOpsLocked(g *group, gone []topicPartition) ([]coord.Op, map[int64]*pendingTxnOffsets, error) {
	if len(gone) == 0 {
		return nil, nil, nil
	}
	drop := make(map[topicPartition]bool, len(gone))
	for _, tp := range gone {
		drop[tp] = true
	}
	var ops []coord.Op
	remaining := make(map[int64]*pendingTxnOffsets)
	for producerID, p := range g.txnOffsets {
		kept := &pendingTxnOffsets{ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch}
		for _, o := range p.Offsets {
			if !drop[topicPartition{o.Topic, o.Partition}] {
				kept.Offsets = append(kept.Offsets, o)
			}
		}
		if len(kept.Offsets) == len(p.Offsets) {
			continue
		}
		path := txnOffsetsProducerPath(g.id, producerID)
		if len(kept.Offsets) == 0 {
			ops = append(ops, coord.DeleteOp{Path: path, Version: coord.AnyVersion})
			remaining[producerID] = nil
			continue
		}
		data, err := json.Marshal(kept)
		if err != nil {
			return nil, nil, err
		}
		ops = append(ops, coord.SetOp{Path: path, Data: data, Version: coord.AnyVersion})
		remaining[producerID] = kept
	}
	return ops, remaining, nil
}

// applyDroppedPendingLocked updates g's cache after the operations of
// dropPendingOpsLocked succeeded, and unindexes producers left with nothing.
func (c *Coordinator) applyDroppedPendingLocked(g *group, remaining map[int64]*pendingTxnOffsets) {
	emptied := make(map[int64]*pendingTxnOffsets)
	for producerID, p := range remaining {
		if p == nil {
			delete(g.txnOffsets, producerID)
			emptied[producerID] = nil
			continue
		}
		g.txnOffsets[producerID] = p
	}
	c.dropTxnIndexLocked(g, emptied)
}

// dropTxnIndexLocked removes the group's index entries of the producers in
// pending, whose pending offsets in g are gone; the caller holds g.offsetMu. An entry left
// behind by a failure is harmless: the next marker finds nothing pending
// and removes it.
func (c *Coordinator) dropTxnIndexLocked(g *group, pending map[int64]*pendingTxnOffsets) {
	for producerID := range pending {
		if err := c.store.Delete(txnIndexGroupPath(producerID, g.id), coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
			c.log.Warn("removing a transactional offsets index entry", "group", g.id, "producer_id", producerID, "err", err)
		}
	}
}

// expireTxnIndex deletes the index nodes of producers with no pending
// offsets left that have not changed for Config.ProducerIDExpiration.
func (c *Coordinator) expireTxnIndex() {
	producers, err := c.store.Children(txnIndexRoot)
	if err != nil {
		if !errors.Is(err, coord.ErrNoNode) {
			c.log.Warn("listing the transactional offsets index", "err", err)
		}
		return
	}
	cutoff := c.cfg.Now().Add(-c.cfg.ProducerIDExpiration)
	for _, name := range producers {
		if c.closed.Load() {
			return
		}
		path := txnIndexRoot + "/" + name
		ok, st, err := c.store.Exists(path)
		if err != nil || !ok || st.NumChildren > 0 || st.Modified.After(cutoff) {
			continue
		}
		// The version check keeps a node raised meanwhile; a child added
		// meanwhile makes the delete fail with ErrNotEmpty.
		if err := c.store.Delete(path, st.Version); err != nil &&
			!errors.Is(err, coord.ErrNoNode) && !errors.Is(err, coord.ErrBadVersion) && !errors.Is(err, coord.ErrNotEmpty) {
			c.log.Warn("expiring a transactional offsets index node", "node", path, "err", err)
		}
	}
}
