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
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
	waitUntil(t, 30*time.Second, "the last commit completes", func() bool {
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
	waitUntil(t, 30*time.Second, "the replacement's commit completes", func() bool {
		d, err := adm.DescribeTransactions(ctx, id)
		return err == nil && d[id].State == "CompleteCommit" && d[id].ProducerEpoch > described.ProducerEpoch
	})
	if got := readValues(t, b, topic, kgo.ReadCommitted()); !sameValues(got, committed, valuesWith("r1", 1)) {
		t.Fatalf("read_committed after the fence: %v", got)
	}
}
