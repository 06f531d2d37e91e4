package e2e

// Transactions on a secured cluster: three ZooKeeper brokers whose only
// listener is SASL_SSL, ACLs on. The coordinator's markers reach the
// leaders on the other brokers over TLS as the inter-broker SCRAM user, and
// the producer needs Write on its transactional ID.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

func TestTransactionsSecureCluster(t *testing.T) {
	t.Parallel()
	const topic, id = "secure-txn", "secure-txn-id"
	c, as := startSecureCluster(t, map[string]string{"broker": "replicate-me", "admin": "admin-pw", "producer": "producer-pw"})
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Three partitions on three brokers: whichever coordinates the ID, the
	// markers go to leaders elsewhere too.
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	waitfor.Until(c.t, 30*time.Second, "the topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
	leaders := map[int32]bool{}
	for p := int32(0); p < 3; p++ {
		leaders[c.leaderOf(adm, topic, p)] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("the partitions' leaders are %v: the markers would not leave one broker", leaders)
	}

	producerOpts := append(as("producer"), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	// Write on the topic alone is not enough for a transactional producer.
	if results, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:producer").Topics(topic).Operations(kadm.OpWrite)); err != nil || results[0].Err != nil {
		t.Fatalf("CreateAcls: %v %+v", err, results)
	}
	// kafkaClient, not c.client: the admin's SASL would come first.
	denied := kafkaClient(t, c, append(producerOpts, kgo.TransactionTimeout(10*time.Second))...)
	// franz-go asks for the producer ID when the transaction begins.
	err := denied.BeginTransaction()
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("producing without Write on the transactional ID: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}
	if results, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:producer").TransactionalIDs(id).Operations(kadm.OpWrite)); err != nil || results[0].Err != nil {
		t.Fatalf("CreateAcls: %v %+v", err, results)
	}

	// The coordinator learns the new ACL from ZooKeeper on its own time
	// (within 2 s, security_acl_test.go) and refuses InitProducerId until
	// then; franz-go takes that refusal as fatal for the client, so each
	// try is a new client, and the one that begins its transaction stays.
	var producer *kgo.Client
	waitfor.Until(c.t, 15*time.Second, "the coordinator to apply the transactional ID's ACL", func() bool {
		cl := kafkaClient(t, c, producerOpts...)
		err := cl.BeginTransaction()
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			cl.Close()
			return false
		}
		if err != nil {
			t.Fatalf("beginning a transaction with Write on the transactional ID: %v", err)
		}
		producer = cl
		return true
	})
	for i, step := range []struct {
		prefix string
		end    kgo.TransactionEndTry
	}{{"c1", kgo.TryCommit}, {"a1", kgo.TryAbort}, {"c2", kgo.TryCommit}} {
		if i > 0 { // the first began above
			if err := producer.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if err := producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s-%d", step.prefix, i))).FirstErr(); err != nil {
				t.Fatalf("%s: %v", step.prefix, err)
			}
		}
		if err := producer.EndTransaction(ctx, step.end); err != nil {
			t.Fatalf("%s: %v", step.prefix, err)
		}
	}
	waitfor.Until(c.t, 30*time.Second, "the last commit's markers", func() bool {
		d, err := adm.DescribeTransactions(ctx, id)
		return err == nil && d[id].Err == nil && d[id].State == "CompleteCommit"
	})
	// Every partition's last stable offset reaches its end: the markers
	// were written on every leader.
	stable, err1 := adm.ListCommittedOffsets(ctx, topic)
	end, err2 := adm.ListEndOffsets(ctx, topic)
	if err1 != nil || err2 != nil || stable.Error() != nil || end.Error() != nil {
		t.Fatalf("offsets: %v %v", err1, err2)
	}
	var total int64
	end.Each(func(o kadm.ListedOffset) {
		s, _ := stable.Lookup(o.Topic, o.Partition)
		if s.Offset != o.Offset {
			t.Errorf("partition %d: last stable offset %d, end %d", o.Partition, s.Offset, o.Offset)
		}
		total += o.Offset
	})
	// 9 records and 3 markers, one per transaction on each partition it
	// wrote (round robin: every partition).
	if total != 9+9 {
		t.Errorf("the partitions hold %d offsets, want 18 (9 records, 9 markers)", total)
	}
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for len(got) < 6 && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if want := append(valuesWith("c1", 3), valuesWith("c2", 3)...); !sameValues(got, want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
}
