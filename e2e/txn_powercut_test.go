package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestTxnPowerCut: a power cut (the broker's --hold-unsynced-writes layer,
// then SIGKILL) after a committed, an aborted and another committed
// transaction on a topic with millrace.flush.on.ack. The markers were
// fsynced before the last stable offset passed them; the abort's
// .txnindex entry was not (it is fsynced with its segment, and recovered
// from the log after a crash). The restarted broker lists the abort again:
// read_committed readers see exactly the committed records.
func TestTxnPowerCut(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--hold-unsynced-writes")
	const topic = "txn-powercut"
	on := "true"
	b.createTopic(t, topic, 1, map[string]*string{"millrace.flush.on.ack": &on})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl := kafkaClient(t, b, kgo.TransactionalID("powercut-txn"), kgo.TransactionTimeout(time.Minute))
	transact := func(values []string, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	first, aborted, last := valuesWith("c", 2), valuesWith("a", 2), valuesWith("d", 1)
	transact(first, true)    // 0-1, marker 2
	transact(aborted, false) // 3-4, marker 5
	transact(last, true)     // 6, marker 7
	cl.Close()

	// The markers follow EndTxn's answer; the last stable offset reaches
	// the log end once the last is written and fsynced.
	adm := kadm.NewClient(kafkaClient(t, b))
	stable := func() int64 {
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil || lso.Error() != nil {
			return -1
		}
		o, _ := lso.Lookup(topic, 0)
		return o.Offset
	}
	waitfor.Until(t, 30*time.Second, "the last marker to be stable", func() bool { return stable() == 8 })
	if got := readValues(t, b, topic, kgo.ReadCommitted()); !sameValues(got, first, last) {
		t.Fatalf("before the cut: read_committed read %v", got)
	}

	b.kill()
	b.restart(syscall.SIGKILL) // already dead: starts it again
	if got := stable(); got != 8 {
		t.Fatalf("after the cut: last stable offset %d, want 8", got)
	}
	if got := readValues(t, b, topic, kgo.ReadCommitted()); !sameValues(got, first, last) {
		t.Fatalf("after the cut: read_committed read %v, want %v and %v (the aborted %v dropped)", got, first, last, aborted)
	}
}
