package e2e

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestTxnPartitionStateAcrossRestarts: a partition with a committed, an
// aborted and an open transaction keeps its last stable offset (before the
// open transaction) and its aborted transaction across a clean restart and
// a SIGKILL, and with its producer state snapshot deleted by hand:
// read_committed readers see exactly the committed records,
// read_uncommitted ones every record. A new instance of the transactional
// ID then aborts the open transaction and what it commits is read.
func TestTxnPartitionStateAcrossRestarts(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic = "txn-restart"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, b))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	transact := func(cl *kgo.Client, values []string, end string) {
		t.Helper()
		transactValues(ctx, t, cl, topic, values, end)
	}
	// A transaction timeout far longer than the test: the open one must
	// stay open until it is committed.
	producer := func() *kgo.Client {
		return kafkaClient(t, b, kgo.TransactionalID("restart-txn"), kgo.TransactionTimeout(5*time.Minute))
	}
	committed, aborted, open := valuesWith("c", 3), valuesWith("a", 2), valuesWith("o", 2)
	cl := producer()
	transact(cl, committed, "commit") // 0-2, marker 3
	transact(cl, aborted, "abort")    // 4-5, marker 6
	transact(cl, open, "open")        // 7-8, open

	check := func(when string) {
		t.Helper()
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil || lso.Error() != nil {
			t.Fatalf("%s: committed offsets: %v %v", when, err, lso.Error())
		}
		if o, _ := lso.Lookup(topic, 0); o.Offset != 7 {
			t.Fatalf("%s: last stable offset %d, want 7", when, o.Offset)
		}
		if got := readValues(t, b, topic, kgo.ReadCommitted()); !sameValues(got, committed) {
			t.Fatalf("%s: read_committed read %v, want %v", when, got, committed)
		}
		if got := readValues(t, b, topic, kgo.ReadUncommitted()); !sameValues(got, committed, aborted, open) {
			t.Fatalf("%s: read_uncommitted read %v", when, got)
		}
	}
	check("before restarting")
	// SIGKILL first: no producer state snapshot was written yet (the first
	// comes with a segment roll, a clean stop or the broker's minute
	// round), so the restarted broker rebuilds the state from the log.
	b.restart(syscall.SIGKILL)
	check("after SIGKILL")
	b.restart(syscall.SIGTERM)
	check("after a clean restart")
	b.stop(syscall.SIGTERM, 15*time.Second)
	var snapshots []string
	err := filepath.WalkDir(b.data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "producer-state.snapshot" && strings.Contains(path, topic) {
			snapshots = append(snapshots, path)
		}
		return err
	})
	if err != nil || len(snapshots) != 1 {
		t.Fatalf("the partition's producer state snapshot after a clean stop: %v, %v", snapshots, err)
	}
	if err := os.Remove(snapshots[0]); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.waitReady()
	check("after deleting the snapshot")

	// The open transaction's producer is gone with the broker it talked
	// to; a new instance of the transactional ID aborts it (fencing), and
	// what it commits next is read.
	cl.Close()
	next := producer()
	later := valuesWith("n", 2)
	transact(next, later, "commit")
	// EndTxn is answered once the commit is decided; its markers follow,
	// and until they land the last stable offset stays before the records.
	waitfor.Until(t, time.Minute, "read_committed reading exactly the committed records and the new producer's", func() bool {
		return sameValues(readValues(t, b, topic, kgo.ReadCommitted()), committed, later)
	})
}

// TestTxnPartitionFailover: the followers of a partition learn its open
// transaction and its aborted one from the batches and markers they copy,
// so the leader elected when the old one is SIGKILLed answers the same
// last stable offset and read_committed readers still see exactly the
// committed records; a new instance of the transactional ID then ends the
// open transaction and its committed records are read.
func TestTxnPartitionFailover(t *testing.T) {
	t.Parallel()
	c := startLocalCluster(t, 3, 1)
	const topic = "txn-failover"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := c.admin()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	producer := func() *kgo.Client {
		return c.client(kgo.TransactionalID("failover-txn"), kgo.TransactionTimeout(5*time.Minute))
	}
	transact := func(cl *kgo.Client, values []string, end string) {
		t.Helper()
		transactValues(ctx, t, cl, topic, values, end)
	}
	committed, aborted, open := valuesWith("c", 3), valuesWith("a", 2), valuesWith("o", 2)
	cl := producer()
	transact(cl, committed, "commit") // 0-2, marker 3
	transact(cl, aborted, "abort")    // 4-5, marker 6
	transact(cl, open, "open")        // 7-8

	lastStable := func() int64 {
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil || lso.Error() != nil {
			return -1
		}
		o, _ := lso.Lookup(topic, 0)
		return o.Offset
	}
	if got := lastStable(); got != 7 {
		t.Fatalf("last stable offset %d, want 7", got)
	}
	old := c.leaderOf(adm, topic, 0)
	c.signal(old, syscall.SIGKILL)
	waitfor.Until(t, time.Minute, "a new leader", func() bool {
		l := c.leaderOf(adm, topic, 0)
		return l >= 0 && l != old
	})
	// A new leader's high watermark may lag its log end until the other
	// replica fetches; the last stable offset is judged once it is there.
	waitfor.Until(t, time.Minute, "the new leader's high watermark at the log end", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset == 9
	})
	if got := lastStable(); got != 7 {
		t.Fatalf("new leader's last stable offset %d, want 7", got)
	}
	if got := readValues(t, c, topic, kgo.ReadCommitted()); !sameValues(got, committed) {
		t.Fatalf("read_committed from the new leader read %v, want %v", got, committed)
	}
	c.restart(old)

	cl.Close()
	next := producer()
	later := valuesWith("n", 2)
	transact(next, later, "commit")
	// EndTxn is answered once the commit is decided; its markers follow,
	// and until they land the last stable offset stays before the records.
	waitfor.Until(t, time.Minute, "read_committed reading exactly the committed records and the new producer's", func() bool {
		return sameValues(readValues(t, c, topic, kgo.ReadCommitted()), committed, later)
	})
}

// transactValues writes values to topic in a transaction ended by end ("commit",
// "abort") or left open ("open").
func transactValues(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, values []string, end string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if end != "open" {
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(end == "commit")); err != nil {
			t.Fatal(err)
		}
	}
}
