package e2e

// The transaction coordinator against franz-go's transactional producer on
// one broker: commits and an abort end as the producer decided, admin
// clients describe and list the transactional ID, and a second producer
// with the same transactional ID fences the first.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

func TestTransactionCoordinatorFranzGo(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic, id = "txn-coord", "coord-franz"
	adm := kadm.NewClient(kafkaClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	producer := kafkaClient(t, b, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	// transaction produces n records named prefix-i on both partitions and
	// ends it.
	transaction := func(cl *kgo.Client, prefix string, n int, commit kgo.TransactionEndTry) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i := range n {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", prefix, i))).FirstErr(); err != nil {
				return err
			}
		}
		return cl.EndTransaction(ctx, commit)
	}
	for _, step := range []struct {
		prefix string
		n      int
		end    kgo.TransactionEndTry
	}{{"c1", 3, kgo.TryCommit}, {"a1", 3, kgo.TryAbort}, {"c2", 2, kgo.TryCommit}} {
		if err := transaction(producer, step.prefix, step.n, step.end); err != nil {
			t.Fatalf("transaction %s: %v", step.prefix, err)
		}
	}
	// The markers follow EndTxn's answer: wait for the coordinator to
	// record them written.
	var described kadm.DescribedTransaction
	waitfor.Until(t, 30*time.Second, "the last commit completes", func() bool {
		d, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return false
		}
		described = d[id]
		return described.Err == nil && described.State == "CompleteCommit"
	})
	if described.ProducerID < 0 || described.TimeoutMillis <= 0 {
		t.Fatalf("described %+v", described)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"})
	if err != nil || !slices.Contains(listed.TransactionalIDs(), id) {
		t.Fatalf("ListTransactions CompleteCommit: %v %v", listed.TransactionalIDs(), err)
	}
	committed := append(valuesWith("c1", 3), valuesWith("c2", 2)...)
	if got := readValues(t, b, topic, kgo.ReadCommitted()); !sameValues(got, committed) {
		t.Fatalf("read_committed: %v, want %v", got, committed)
	}
	if got := readValues(t, b, topic, kgo.ReadUncommitted()); !sameValues(got, committed, valuesWith("a1", 3)) {
		t.Fatalf("read_uncommitted: %v", got)
	}

	// A new producer with the same transactional ID fences the old one,
	// whose next transaction fails.
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, kgo.StringRecord("zombie-0")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	replacement := kafkaClient(t, b, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
	if err := transaction(replacement, "r1", 1, kgo.TryCommit); err != nil {
		t.Fatalf("the replacement's transaction: %v", err)
	}
	err = producer.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}
	waitfor.Until(t, 30*time.Second, "the replacement's commit completes", func() bool {
		d, err := adm.DescribeTransactions(ctx, id)
		return err == nil && d[id].State == "CompleteCommit" && d[id].ProducerEpoch > described.ProducerEpoch
	})
	if got := readValues(t, b, topic, kgo.ReadCommitted()); !sameValues(got, committed, valuesWith("r1", 1)) {
		t.Fatalf("read_committed after the fence: %v", got)
	}
}

// TestTransactionCoordinatorFailover: on a 3-broker ZooKeeper cluster the
// broker coordinating two transactional IDs is SIGKILLed while one ID has a
// transaction open. The broker that takes the IDs over from the store
// aborts the open transaction once its timeout passes (the last stable
// offset reaches the log end again) and serves the other ID's next
// transactions; read_committed sees exactly the committed records.
func TestTransactionCoordinatorFailover(t *testing.T) {
	t.Parallel()
	c := startLocalClusterWith(t, 3, 1, "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")
	const topic = "txn-failover"
	c.createReplicatedTopic(topic, 2)
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Two IDs with the same coordinator, so one kill moves both.
	ids := make([]string, 0, 2)
	var victim int32 = -1
	for i := 0; len(ids) < 2; i++ {
		id := fmt.Sprintf("fo-%d", i)
		coordinator := adm.FindTxnCoordinators(ctx, id)[id]
		if coordinator.Err != nil {
			t.Fatalf("FindCoordinator %s: %v", id, coordinator.Err)
		}
		if victim < 0 || coordinator.NodeID == victim {
			victim = coordinator.NodeID
			ids = append(ids, id)
		}
	}
	open, committing := ids[0], ids[1]

	opener := c.client(kgo.TransactionalID(open), kgo.TransactionTimeout(4*time.Second), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := opener.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := opener.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("open-%d", i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	producer := c.client(kgo.TransactionalID(committing), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	transaction := func(prefix string, n int, end kgo.TransactionEndTry) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", prefix, i))).FirstErr(); err != nil {
				t.Fatalf("%s: %v", prefix, err)
			}
		}
		if err := producer.EndTransaction(ctx, end); err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
	}
	transaction("c1", 3, kgo.TryCommit)

	c.signal(victim, syscall.SIGKILL)
	transaction("c2", 2, kgo.TryCommit)
	transaction("a1", 2, kgo.TryAbort)

	waitfor.Until(t, time.Minute, "the open transaction to be aborted by the new coordinator", func() bool {
		d, err := adm.DescribeTransactions(ctx, open)
		if err != nil || d[open].Err != nil || d[open].State != "CompleteAbort" || d[open].Coordinator == victim {
			return false
		}
		stable, err1 := adm.ListCommittedOffsets(ctx, topic)
		end, err2 := adm.ListEndOffsets(ctx, topic)
		if err1 != nil || err2 != nil || stable.Error() != nil || end.Error() != nil {
			return false
		}
		same := true
		end.Each(func(o kadm.ListedOffset) {
			s, ok := stable.Lookup(o.Topic, o.Partition)
			same = same && ok && s.Offset == o.Offset
		})
		return same
	})
	want := append(valuesWith("c1", 3), valuesWith("c2", 2)...)
	if got := readValues(t, c, topic, kgo.ReadCommitted()); !sameValues(got, want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
}
