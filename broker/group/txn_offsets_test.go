package group

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCommitReq is a TxnOffsetCommit of offsets on topic; memberID and
// generation are sent from v3 (generation -1 and "" mean no member).
func txnCommitReq(version int16, group string, producerID int64, epoch int16, memberID string, generation int32, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version, r.TransactionalID, r.Group = version, "txn", group
	r.ProducerID, r.ProducerEpoch = producerID, epoch
	r.Generation, r.MemberID = generation, memberID
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		meta := "txn-meta"
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, 4, &meta
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// txnCommit sends a TxnOffsetCommit and returns its only partition's code
// (every partition must agree).
func txnCommit(t *testing.T, c *Coordinator, req *kmsg.TxnOffsetCommitRequest) int16 {
	t.Helper()
	resp := c.TxnOffsetCommit(context.Background(), wire(t, req))
	code := int16(-100)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if code != -100 && rp.ErrorCode != code {
				t.Fatalf("partitions answered differently: %+v", resp.Topics)
			}
			code = rp.ErrorCode
		}
	}
	return code
}

// stableFetch fetches one partition's offset with require_stable (v7).
func stableFetch(t *testing.T, c *Coordinator, group, topic string, partition int32) (int64, int16) {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group, r.RequireStable = 7, group, true
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := c.OffsetFetch(context.Background(), r)
	if resp.ErrorCode != errNone {
		t.Fatalf("fetch %s: group error %d", group, resp.ErrorCode)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestPartitionIsKafkas compares with Java's String.hashCode, computed by
// the JVM, including Integer.MIN_VALUE and a string outside the BMP.
func TestPartitionIsKafkas(t *testing.T) {
	for _, tc := range []struct {
		group string
		want  int32
	}{{"g", 3}, {"my-group", 12}, {"connect-cluster", 13}, {"polygenelubricants", 0}, {"été-😀", 26}} {
		if got := Partition(tc.group); got != tc.want {
			t.Errorf("Partition(%q) = %d, want %d", tc.group, got, tc.want)
		}
	}
}

// TestTxnOffsetsVisibleOnlyOnCommit: pending offsets are invisible to
// OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable), survive a
// restart of the coordinator and of the store, become committed offsets on
// a commit marker and vanish on an abort.
func TestTxnOffsetsVisibleOnlyOnCommit(t *testing.T) {
	e := newEnv(t, testConfig())
	ctx := context.Background()
	id := stableGroup(t, e, "g", time.Minute)
	if codes := commitCodes(e.c.OffsetCommit(ctx, commitReq("g", id, 1, "t", map[int32]int64{0: 5}))); codes[0] != errNone {
		t.Fatalf("plain commit: %v", codes)
	}
	// A KIP-447 member commit (v3) and an older producer's (v2) from
	// another producer, on other partitions.
	if code := txnCommit(t, e.c, txnCommitReq(3, "g", 7, 0, id, 1, "t", map[int32]int64{0: 10})); code != errNone {
		t.Fatalf("txn commit v3: %d", code)
	}
	if code := txnCommit(t, e.c, txnCommitReq(2, "g", 8, 0, "", -1, "t", map[int32]int64{1: 20})); code != errNone {
		t.Fatalf("txn commit v2: %d", code)
	}
	check := func(when string, p int32, wantOffset int64, wantCode int16) {
		t.Helper()
		if got := fetchOffset(t, e.c, "g", "t", p); got != wantOffset {
			t.Fatalf("%s: t/%d = %d, want %d", when, p, got, wantOffset)
		}
		if off, code := stableFetch(t, e.c, "g", "t", p); code != wantCode || (code == errNone && off != wantOffset) {
			t.Fatalf("%s: stable fetch t/%d = %d code %d, want %d code %d", when, p, off, code, wantOffset, wantCode)
		}
	}
	check("pending", 0, 5, errUnstableOffsetCommit)
	check("pending", 1, -1, errUnstableOffsetCommit)
	check("pending", 2, -1, errNone)
	if !e.nodeExists(txnIndexGroupPath(7, "g")) || !e.nodeExists(txnOffsetsProducerPath("g", 7)) {
		t.Fatal("pending offsets not stored with their index entry")
	}
	e.restart()
	check("after coordinator restart", 0, 5, errUnstableOffsetCommit)
	e.reopen()
	check("after store reopen", 1, -1, errUnstableOffsetCommit)

	// A marker for another partition of __consumer_offsets completes nothing.
	if code := e.c.CompleteTxnOffsets(ctx, 7, 0, true, Partition("g")+1); code != errNone {
		t.Fatalf("marker elsewhere: %d", code)
	}
	check("marker for another partition", 0, 5, errUnstableOffsetCommit)

	if code := e.c.CompleteTxnOffsets(ctx, 7, 0, true, Partition("g")); code != errNone {
		t.Fatalf("commit marker: %d", code)
	}
	check("committed", 0, 10, errNone)
	check("other producer still pending", 1, -1, errUnstableOffsetCommit)
	if code := e.c.CompleteTxnOffsets(ctx, 8, 0, false, Partition("g")); code != errNone {
		t.Fatalf("abort marker: %d", code)
	}
	check("aborted", 1, -1, errNone)
	check("committed stays", 0, 10, errNone)
	// A repeated marker is harmless.
	if code := e.c.CompleteTxnOffsets(ctx, 7, 0, true, Partition("g")); code != errNone {
		t.Fatalf("repeated marker: %d", code)
	}
	var stored offsetEntry
	if err := json.Unmarshal([]byte(e.nodeData(offsetPath("g", "t", 0))), &stored); err != nil || stored.Offset != 10 || stored.LeaderEpoch != 4 || stored.Metadata != "txn-meta" {
		t.Fatalf("stored committed offset %+v (%v)", stored, err)
	}
	for _, path := range []string{txnIndexGroupPath(7, "g"), txnIndexGroupPath(8, "g"), txnOffsetsProducerPath("g", 7), txnOffsetsProducerPath("g", 8)} {
		if e.nodeExists(path) {
			t.Fatalf("%s left after completion", path)
		}
	}
	e.reopen()
	check("after completion and reopen", 0, 10, errNone)
}

// TestTxnOffsetCommitChecks: KIP-447's member checks, the producer epoch
// fencing by pending offsets and by markers, and bad input.
func TestTxnOffsetCommitChecks(t *testing.T) {
	e := newEnv(t, testConfig())
	ctx := context.Background()
	id := stableGroup(t, e, "g", time.Minute)
	for _, tc := range []struct {
		name string
		req  *kmsg.TxnOffsetCommitRequest
		want int16
	}{
		{"old generation", txnCommitReq(3, "g", 1, 0, id, 0, "t", map[int32]int64{0: 1}), errIllegalGeneration},
		{"unknown member", txnCommitReq(3, "g", 1, 0, "nobody", 1, "t", map[int32]int64{0: 1}), errUnknownMemberID},
		{"member of an unknown group", txnCommitReq(3, "new", 1, 0, "nobody", 1, "t", map[int32]int64{0: 1}), errUnknownMemberID},
		{"no member, group with members (v3)", txnCommitReq(3, "g", 1, 0, "", -1, "t", map[int32]int64{0: 1}), errNone},
		{"empty group ID", txnCommitReq(3, "", 1, 0, "", -1, "t", map[int32]int64{0: 1}), errInvalidGroupID},
		{"no producer ID", txnCommitReq(3, "g", -1, 0, "", -1, "t", map[int32]int64{0: 1}), errInvalidProducerEpoch},
		{"v4", func() *kmsg.TxnOffsetCommitRequest {
			r := txnCommitReq(3, "g", 1, 0, "", -1, "t", map[int32]int64{0: 1})
			r.Version = 4
			return r
		}(), errUnsupportedVersion},
	} {
		if got := txnCommit(t, e.c, tc.req); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if e.c.getGroup("new", false) != nil {
		t.Error("a refused commit left group \"new\" in memory")
	}
	// A static member replaced by a newer instance is fenced.
	instance := "host-1"
	join := joinReq(9, "s", "", time.Minute, "t")
	join.InstanceID = &instance
	first := e.c.JoinGroup(clientCtx("a"), join)
	if first.ErrorCode == errMemberIDRequired {
		join.MemberID = first.MemberID
		first = e.c.JoinGroup(clientCtx("a"), join)
	}
	req := txnCommitReq(3, "s", 1, 0, "stale-member", first.Generation, "t", map[int32]int64{0: 1})
	req.InstanceID = &instance
	if got := txnCommit(t, e.c, req); got != errFencedInstanceID {
		t.Errorf("fenced instance: %d, want FENCED_INSTANCE_ID", got)
	}

	// Producer 1 has pending offsets at epoch 3: an older epoch is fenced,
	// and so is a marker older than them.
	if got := txnCommit(t, e.c, txnCommitReq(2, "g", 1, 3, "", -1, "t", map[int32]int64{1: 2})); got != errNone {
		t.Fatalf("epoch 3: %d", got)
	}
	if got := txnCommit(t, e.c, txnCommitReq(2, "g", 1, 2, "", -1, "t", map[int32]int64{1: 3})); got != errInvalidProducerEpoch {
		t.Errorf("older epoch: %d, want INVALID_PRODUCER_EPOCH", got)
	}
	if got := e.c.CompleteTxnOffsets(ctx, 1, 2, true, Partition("g")); got != errInvalidProducerEpoch {
		t.Errorf("older marker: %d, want INVALID_PRODUCER_EPOCH", got)
	}
	// The coordinator aborts with a bumped epoch (a timed-out transaction):
	// the zombie's late commit at epoch 3 must not leave offsets behind.
	if got := e.c.CompleteTxnOffsets(ctx, 1, 4, false, Partition("g")); got != errNone {
		t.Fatalf("abort at epoch 4: %d", got)
	}
	if got := txnCommit(t, e.c, txnCommitReq(2, "g", 1, 3, "", -1, "t", map[int32]int64{1: 9})); got != errInvalidProducerEpoch {
		t.Errorf("zombie after the abort: %d, want INVALID_PRODUCER_EPOCH", got)
	}
	// So is a producer whose first transactional commit comes after a
	// marker (the marker arrived first).
	if got := e.c.CompleteTxnOffsets(ctx, 2, 6, false, Partition("g")); got != errNone {
		t.Fatalf("marker with nothing pending: %d", got)
	}
	if got := txnCommit(t, e.c, txnCommitReq(2, "g", 2, 5, "", -1, "t", map[int32]int64{1: 9})); got != errInvalidProducerEpoch {
		t.Errorf("commit older than a marker: %d, want INVALID_PRODUCER_EPOCH", got)
	}
	if off, code := stableFetch(t, e.c, "g", "t", 1); code != errNone || off != -1 {
		t.Errorf("t/1 after the fenced commits: %d code %d, want -1 and no error", off, code)
	}

	// Per-partition refusals.
	big := txnCommitReq(2, "g", 3, 0, "", -1, "t", map[int32]int64{0: 1})
	huge := string(make([]byte, e.c.cfg.MaxMetadataBytes+1))
	big.Topics[0].Partitions[0].Metadata = &huge
	if got := txnCommit(t, e.c, big); got != errOffsetMetadataTooLarge {
		t.Errorf("metadata too large: %d", got)
	}
}

// TestTxnOffsetsCompletedAfterTakeover: broker b takes the group over
// between the TxnOffsetCommit (at a) and the marker; b completes the
// offsets it never saw committed, and a's late write is fenced. Then the
// reverse: a marker reaching a broker that does not coordinate the group
// still completes it, and the coordinator serves the result.
func TestTxnOffsetsCompletedAfterTakeover(t *testing.T) {
	var own ownership
	own.moveTo("a")
	e := newEnv(t, own.configFor("a"))
	b := New(e.store, own.configFor("b"), testLogger())
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	a := e.c

	if code := txnCommit(t, a, txnCommitReq(2, "g", 11, 0, "", -1, "t", map[int32]int64{0: 100})); code != errNone {
		t.Fatalf("txn commit at a: %d", code)
	}
	own.moveTo("b")
	if _, code := stableFetch(t, b, "g", "t", 0); code != errUnstableOffsetCommit {
		t.Fatalf("b's stable fetch of a's pending offset: %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	if code := b.CompleteTxnOffsets(ctx, 11, 0, true, Partition("g")); code != errNone {
		t.Fatalf("marker at b: %d", code)
	}
	if off, code := stableFetch(t, b, "g", "t", 0); code != errNone || off != 100 {
		t.Fatalf("b after the marker: %d code %d, want 100", off, code)
	}
	// a no longer coordinates the group: its request is refused.
	if code := txnCommit(t, a, txnCommitReq(2, "g", 11, 0, "", -1, "t", map[int32]int64{0: 1})); code != errNotCoordinator {
		t.Fatalf("txn commit at the former coordinator: %d, want NOT_COORDINATOR", code)
	}

	// b holds a new transaction's offsets; the marker reaches a, which
	// does not coordinate the group.
	if code := txnCommit(t, b, txnCommitReq(2, "g", 11, 1, "", -1, "t", map[int32]int64{0: 200})); code != errNone {
		t.Fatalf("txn commit at b: %d", code)
	}
	if code := a.CompleteTxnOffsets(ctx, 11, 1, true, Partition("g")); code != errNone {
		t.Fatalf("marker at a: %d", code)
	}
	if off, code := stableFetch(t, b, "g", "t", 0); code != errNone || off != 200 {
		t.Fatalf("b after a completed: %d code %d, want 200", off, code)
	}
	// b's next write sees a's claim, refuses once, and succeeds when retried.
	req := txnCommitReq(2, "g", 11, 2, "", -1, "t", map[int32]int64{0: 300})
	code := txnCommit(t, b, req)
	if code == errNotCoordinator {
		code = txnCommit(t, b, req)
	}
	if code != errNone {
		t.Fatalf("b's commit after a's completion: %d", code)
	}
	if code := b.CompleteTxnOffsets(ctx, 11, 2, true, Partition("g")); code != errNone {
		t.Fatalf("marker at b: %d", code)
	}
	if off := fetchOffset(t, b, "g", "t", 0); off != 300 {
		t.Fatalf("final offset %d, want 300", off)
	}
}

// TestTxnOffsetsPlainCommitAfterwardsWins: Kafka keeps the later of a
// transactional and a plain commit of a partition.
func TestTxnOffsetsPlainCommitAfterwardsWins(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	cfg := testConfig()
	cfg.Now = func() time.Time { return now }
	e := newEnv(t, cfg)
	ctx := context.Background()
	if code := txnCommit(t, e.c, txnCommitReq(2, "g", 1, 0, "", -1, "t", map[int32]int64{0: 10, 1: 10})); code != errNone {
		t.Fatalf("txn commit: %d", code)
	}
	now = now.Add(time.Second)
	if codes := commitCodes(e.c.OffsetCommit(ctx, commitReq("g", "", -1, "t", map[int32]int64{0: 50}))); codes[0] != errNone {
		t.Fatalf("plain commit: %v", codes)
	}
	if code := e.c.CompleteTxnOffsets(ctx, 1, 0, true, Partition("g")); code != errNone {
		t.Fatalf("marker: %d", code)
	}
	if got := fetchOffset(t, e.c, "g", "t", 0); got != 50 {
		t.Errorf("t/0 = %d, want the later plain commit's 50", got)
	}
	if got := fetchOffset(t, e.c, "g", "t", 1); got != 10 {
		t.Errorf("t/1 = %d, want the transaction's 10", got)
	}
}

// TestTxnOffsetsGroupDeletionAndExpiry: OffsetDelete drops its partitions'
// pending offsets; an Empty group with only pending offsets is not expired;
// deleting it drops them with their index entry, and an idle producer's
// index node expires.
func TestTxnOffsetsGroupDeletionAndExpiry(t *testing.T) {
	now := time.Now()
	cfg := testConfig()
	cfg.Now = func() time.Time { return now }
	e := newEnv(t, cfg)
	ctx := context.Background()
	if code := txnCommit(t, e.c, txnCommitReq(2, "g", 5, 0, "", -1, "t", map[int32]int64{0: 1})); code != errNone {
		t.Fatalf("txn commit: %d", code)
	}
	// OffsetDelete takes the pending offsets of its partitions too.
	if code := txnCommit(t, e.c, txnCommitReq(2, "g", 5, 0, "", -1, "u", map[int32]int64{0: 1})); code != errNone {
		t.Fatalf("txn commit u: %d", code)
	}
	if code := txnCommit(t, e.c, txnCommitReq(2, "g", 6, 0, "", -1, "u", map[int32]int64{1: 1})); code != errNone {
		t.Fatalf("txn commit u by producer 6: %d", code)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	if resp := e.c.OffsetDelete(ctx, od); resp.ErrorCode != errNone || resp.Topics[0].Partitions[0].ErrorCode != errNone || resp.Topics[0].Partitions[1].ErrorCode != errNone {
		t.Fatalf("OffsetDelete: %+v", resp)
	}
	for _, p := range []int32{0, 1} {
		if _, code := stableFetch(t, e.c, "g", "u", p); code != errNone {
			t.Fatalf("u/%d after OffsetDelete: %d, want no pending offset", p, code)
		}
	}
	if _, code := stableFetch(t, e.c, "g", "t", 0); code != errUnstableOffsetCommit {
		t.Fatalf("t/0 after OffsetDelete of u: %d, want still pending", code)
	}
	if e.nodeExists(txnOffsetsProducerPath("g", 6)) || e.nodeExists(txnIndexGroupPath(6, "g")) || !e.nodeExists(txnIndexGroupPath(5, "g")) {
		t.Fatal("OffsetDelete left producer 6's pending offsets or index entry, or dropped producer 5's")
	}
	e.restart()
	// A group with nothing but pending offsets is listed from the store.
	lg := kmsg.NewPtrListGroupsRequest()
	if groups := e.c.ListGroups(ctx, lg).Groups; len(groups) != 1 || groups[0].Group != "g" || groups[0].GroupState != "Empty" {
		t.Fatalf("ListGroups after a restart: %+v, want g Empty", groups)
	}
	if _, code := stableFetch(t, e.c, "g", "u", 0); code != errNone {
		t.Fatalf("u/0 after OffsetDelete and restart: %d", code)
	}

	now = now.Add(e.c.cfg.OffsetsRetention + time.Hour)
	e.c.expireOffsets()
	if !e.nodeExists(txnOffsetsProducerPath("g", 5)) {
		t.Fatal("expiry removed a group with pending transactional offsets")
	}
	d := kmsg.NewPtrDeleteGroupsRequest()
	d.Version, d.Groups = 3, []string{"g"}
	if code := e.c.DeleteGroups(ctx, d).Groups[0].ErrorCode; code != errNone {
		t.Fatalf("delete: %d", code)
	}
	if e.nodeExists(groupPath("g")) || e.nodeExists(txnIndexGroupPath(5, "g")) {
		t.Fatal("deleted group left pending offsets or their index entry")
	}
	if code := e.c.CompleteTxnOffsets(ctx, 5, 0, true, Partition("g")); code != errNone {
		t.Fatalf("marker after deletion: %d", code)
	}
	if got := fetchOffset(t, e.c, "g", "t", 0); got != -1 {
		t.Fatalf("a deleted group's transaction committed offset %d", got)
	}
	// The producer's index node stays (it fences zombies) until it expires.
	if !e.nodeExists(txnIndexPath(5)) {
		t.Fatal("index node gone before producer.id.expiration.ms")
	}
	now = time.Now().Add(e.c.cfg.ProducerIDExpiration + time.Minute)
	e.c.expireOffsets()
	if e.nodeExists(txnIndexPath(5)) {
		t.Fatal("idle producer's index node not expired")
	}
}
