package e2e

// A fenced transactional producer as librdkafka sees it (its test 0103):
// after KIP-890's verification a Produce of the fenced producer is
// answered INVALID_PRODUCER_EPOCH, which librdkafka, unlike
// PRODUCER_FENCED, takes as fatal.

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// confluentFenced runs two librdkafka producers with one transactional ID:
// the first adds the partition to its transaction, the second's
// init_transactions fences it (aborting its transaction), then the first
// produces to the same partition (so the Produce itself meets the fence,
// no AddPartitionsToTxn first) and commits. It prints what the commit
// raised and what the deliveries failed with, as JSON.
const confluentFenced = `
import json, sys
from confluent_kafka import KafkaException, Producer
addr, topic = sys.argv[1], sys.argv[2]
conf = {'bootstrap.servers': addr, 'transactional.id': 'fenced-' + topic, 'linger.ms': 5}
failed = []
def report(err, msg):
    if err is not None:
        failed.append(err.name())
p1 = Producer(dict(conf, on_delivery=report))
p1.init_transactions(30)
p1.begin_transaction()
p1.produce(topic, value=b'before', partition=0)
p1.flush(30)
p2 = Producer(conf)
p2.init_transactions(30)
out = {'delivery_errors_before_fence': list(failed)}
try:
    p1.produce(topic, value=b'zombie', partition=0)
    p1.flush(30)
    p1.commit_transaction(30)
    out['commit'] = 'committed'
except KafkaException as e:
    err = e.args[0]
    out['commit'] = err.name()
    out['fatal'] = err.fatal()
    out['txn_requires_abort'] = err.txn_requires_abort()
out['delivery_errors'] = failed
print(json.dumps(out))
`

// TestTransactionFencedLibrdkafka: the zombie's produce and commit raise
// a fatal error in librdkafka, and the zombie's record is never committed.
func TestTransactionFencedLibrdkafka(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := "ck-fenced"
	if _, err := kadm.NewClient(kafkaClient(t, b)).CreateTopic(context.Background(), 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", confluentFenced, b.addr, topic).CombinedOutput()
	if err != nil {
		t.Fatalf("confluent-kafka: %v\n%s", err, out)
	}
	var seen struct {
		Before           []string `json:"delivery_errors_before_fence"`
		Commit           string   `json:"commit"`
		Fatal            bool     `json:"fatal"`
		TxnRequiresAbort bool     `json:"txn_requires_abort"`
		DeliveryErrors   []string `json:"delivery_errors"`
	}
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &seen); err != nil {
		t.Fatalf("confluent-kafka output: %v\n%s", err, out)
	}
	if len(seen.Before) != 0 {
		t.Fatalf("deliveries failed before the fence: %v", seen.Before)
	}
	if !seen.Fatal || seen.Commit == "committed" {
		t.Fatalf("the fenced producer's commit raised %q (fatal %v, requires abort %v), want a fatal error; deliveries failed with %v\n%s",
			seen.Commit, seen.Fatal, seen.TxnRequiresAbort, seen.DeliveryErrors, out)
	}
	if got := readValues(t, b, topic, kgo.ReadCommitted()); len(got) != 0 {
		t.Fatalf("read_committed read %v, want nothing (both of the zombie's records aborted)", got)
	}
}
