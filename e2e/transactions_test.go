package e2e

// Kafka transactions as clients use them: librdkafka's transactional
// producer and isolation levels (confluent-kafka, kcat), a zombie producer
// fenced by its replacement, and franz-go's GroupTransactSession reading,
// transforming and writing exactly once while its members and the
// transaction coordinator's broker are killed.

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// confluentTransactions drives librdkafka (confluent-kafka) and kcat
// against one topic of two partitions and prints what each reader saw as
// one JSON object: commits c1 (10 records) and c2 (5) around an aborted a1
// (10), then leaves "open" (4) in an open transaction while kcat reads both
// ways, then commits it.
const confluentTransactions = `
import json, subprocess, sys, time
from confluent_kafka import Consumer, Producer
addr, topic = sys.argv[1], sys.argv[2]
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'ck-' + topic, 'linger.ms': 5})
p.init_transactions(30)
def txn(prefix, n, end):
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=('%s-%d' % (prefix, i)).encode(), partition=i % 2)
    p.flush(30)
    if end == 'commit':
        p.commit_transaction(30)
    elif end == 'abort':
        p.abort_transaction(30)
def consume(isolation, want):
    c = Consumer({'bootstrap.servers': addr, 'group.id': 'ck-%s-%s' % (topic, isolation),
                  'auto.offset.reset': 'earliest', 'isolation.level': isolation, 'enable.auto.commit': False})
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    return got
def kcat(isolation):
    out = subprocess.run(['kcat', '-b', addr, '-C', '-t', topic, '-e', '-q', '-f', '%s\n',
                          '-X', 'isolation.level=' + isolation], capture_output=True, text=True, timeout=60)
    return out.stdout.split()
txn('c1', 10, 'commit')
txn('a1', 10, 'abort')
txn('c2', 5, 'commit')
seen = {'committed': consume('read_committed', 15), 'uncommitted': consume('read_uncommitted', 25)}
txn('open', 4, 'leave open')
seen['kcat_committed_open'] = kcat('read_committed')
seen['kcat_uncommitted_open'] = kcat('read_uncommitted')
p.commit_transaction(30)
seen['kcat_committed'] = kcat('read_committed')
print(json.dumps(seen))
`

// valuesWith lists the values named prefix-0 .. prefix-(n-1).
func valuesWith(prefix string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// sameValues reports whether got holds exactly want's values, in any order.
func sameValues(got []string, want ...[]string) bool {
	var all []string
	for _, w := range want {
		all = append(all, w...)
	}
	got, all = slices.Clone(got), slices.Clone(all)
	slices.Sort(got)
	slices.Sort(all)
	return slices.Equal(got, all)
}

// TestTransactionsLibrdkafka: librdkafka's transactional producer commits
// and aborts; a read_committed consumer sees exactly the committed records
// and a read_uncommitted one every record; kcat with
// isolation.level=read_committed stops before an open transaction and sees
// it once committed.
func TestTransactionsLibrdkafka(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "group.initial.rebalance.delay.ms=0")
	topic := "ck-txn"
	if _, err := kadm.NewClient(kafkaClient(t, b)).CreateTopic(context.Background(), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", confluentTransactions, b.addr, topic).CombinedOutput()
	if err != nil {
		t.Fatalf("confluent-kafka: %v\n%s", err, out)
	}
	var seen map[string][]string
	if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &seen); err != nil {
		t.Fatalf("confluent-kafka output: %v\n%s", err, out)
	}
	c1, a1, c2, open := valuesWith("c1", 10), valuesWith("a1", 10), valuesWith("c2", 5), valuesWith("open", 4)
	for _, check := range []struct {
		reader string
		want   [][]string
	}{
		{"committed", [][]string{c1, c2}},
		{"uncommitted", [][]string{c1, a1, c2}},
		{"kcat_committed_open", [][]string{c1, c2}},
		{"kcat_uncommitted_open", [][]string{c1, a1, c2, open}},
		{"kcat_committed", [][]string{c1, c2, open}},
	} {
		if !sameValues(seen[check.reader], check.want...) {
			t.Errorf("%s read %d records %v, want %v", check.reader, len(seen[check.reader]), seen[check.reader], check.want)
		}
	}
}

// readValues reads every record of topic up to its end with isolation (the
// last stable offset for read_committed, else the high watermark) and
// returns the values. Control records are kept only to see where a
// partition's reading has got to.
func readValues(t *testing.T, k kafka, topic string, isolation kgo.IsolationLevel) []string {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, k))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list := adm.ListEndOffsets
	if isolation == kgo.ReadCommitted() {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets of %s: %v %v", topic, err, ends.Error())
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	cl := kafkaClient(t, k, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var values []string
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: partitions not read to their end: %v", topic, remaining)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				values = append(values, string(r.Value))
			}
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	return values
}

// TestTransactionZombieFenced: a transactional producer stopped (SIGSTOP)
// with a transaction open is replaced by one with the same transactional
// ID; when it continues it is fenced (PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH) and none of its open transaction's records, nor
// any later one, become visible to read_committed readers, while what it
// committed before and everything the replacement commits do.
func TestTransactionZombieFenced(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := "zombie-txn"
	if _, err := kadm.NewClient(kafkaClient(t, b)).CreateTopic(context.Background(), 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	const hold = 2
	zombie := startRole(t, "zombie", "txn-zombie", b.addr, topic, "shared-id", "z", strconv.Itoa(hold), "100")
	zombie.waitLog("HOLDING 2", 1, 60*time.Second)
	zombie.signal(syscall.SIGSTOP)
	const replaced = 5
	replacement := startRole(t, "replacement", "txn-zombie", b.addr, topic, "shared-id", "r", "-1", strconv.Itoa(replaced))
	select {
	case <-replacement.done:
	case <-time.After(90 * time.Second):
		t.Fatal("the replacement did not finish its transactions")
	}
	if code := replacement.exitCode(); code != 0 {
		t.Fatalf("replacement exited %d:\n%s", code, replacement.log())
	}
	zombie.signal(syscall.SIGCONT)
	select {
	case <-zombie.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the zombie was not fenced")
	}
	if code := zombie.exitCode(); code != 3 {
		t.Fatalf("zombie exited %d, want 3 (fenced):\n%s", code, zombie.log())
	}

	var want []string
	for txn := 0; txn < hold; txn++ {
		want = append(want, valuesWith(fmt.Sprintf("z-%d", txn), 10)...)
	}
	for txn := 0; txn < replaced; txn++ {
		want = append(want, valuesWith(fmt.Sprintf("r-%d", txn), 10)...)
	}
	// The replacement's last EndTxn was answered once decided; its markers
	// follow, and the last stable offset waits for them.
	waitfor.Until(t, time.Minute, fmt.Sprintf("read_committed to hold exactly %d records (the zombie's first %d transactions and the replacement's %d)", len(want), hold, replaced), func() bool {
		return sameValues(readValues(t, b, topic, kgo.ReadCommitted()), want)
	})
	held := valuesWith(fmt.Sprintf("z-%d", hold), 5)
	if got := readValues(t, b, topic, kgo.ReadUncommitted()); !sameValues(got, want, held) {
		t.Fatalf("read_uncommitted holds %d records, want %d (those committed and the held transaction's 5 aborted ones)", len(got), len(want)+len(held))
	}
}

// signal sends sig to the process.
func (p *process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// TestGroupTransactSessionUnderKills: three GroupTransactSession members
// copy 1,000,000 records from one topic to another on a 3-broker cluster
// while one member is SIGKILLed and restarted, the broker coordinating the
// members' transactions is SIGKILLed and restarted, then another member
// is: read committed, the output holds every input record exactly once.
func TestGroupTransactSessionUnderKills(t *testing.T) {
	t.Parallel()
	const records = 1_000_000
	c := startLocalClusterWith(t, 3, 1, "group.initial.rebalance.delay.ms=0")
	c.createReplicatedTopic("etl-in", 6)
	c.createReplicatedTopic("etl-out", 6)

	in := c.client(kgo.DefaultProduceTopic("etl-in"), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var produceErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < records; i++ {
		wg.Add(1)
		in.Produce(ctx, kgo.StringRecord(strconv.Itoa(i)), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				produceErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if produceErr != nil {
		t.Fatalf("producing the input: %v", produceErr)
	}

	seeds := strings.Join(c.seeds(), ",")
	workers := make([]*process, 3)
	startWorker := func(i int) {
		workers[i] = startRole(t, fmt.Sprintf("etl-%d", i), "txn-etl", seeds, "etl", "etl-in", "etl-out", fmt.Sprintf("etl-%d", i))
	}
	for i := range workers {
		startWorker(i)
	}

	// A read_committed reader counts every output value as it lands.
	seen := make([]uint8, records)
	var distinct, dupes int
	var seenMu sync.Mutex
	out := c.client(kgo.ConsumeTopics("etl-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	go func() {
		for ctx.Err() == nil {
			fs := out.PollFetches(ctx)
			seenMu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				i, err := strconv.Atoi(string(r.Value))
				if err != nil || i < 0 || i >= records {
					dupes++ // not an input value: as wrong as a duplicate
					return
				}
				if seen[i]++; seen[i] == 1 {
					distinct++
				} else {
					dupes++
				}
			})
			seenMu.Unlock()
		}
	}()
	progress := func() (int, int) {
		seenMu.Lock()
		defer seenMu.Unlock()
		return distinct, dupes
	}
	waitOutput := func(n int) {
		waitfor.Until(c.t, 5*time.Minute, fmt.Sprintf("%d records in the output", n), func() bool {
			d, _ := progress()
			return d >= n
		})
	}

	waitOutput(records / 5)
	workers[1].stop(syscall.SIGKILL, 0)
	startWorker(1)

	waitOutput(2 * records / 5)
	coordinator := c.admin().FindTxnCoordinators(ctx, "etl-0")["etl-0"]
	if coordinator.Err != nil {
		t.Fatalf("finding etl-0's transaction coordinator: %v", coordinator.Err)
	}
	victim := coordinator.NodeID
	t.Logf("killing broker %d, the transaction coordinator of etl-0", victim)
	c.signal(victim, syscall.SIGKILL)
	waitOutput(3 * records / 5)
	c.restart(victim)

	workers[2].stop(syscall.SIGKILL, 0)
	startWorker(2)

	waitOutput(records)
	// Every input record is in; whatever a late duplicate would be has been
	// written by the time the group has committed the whole input and the
	// reader has read up to the last stable offset.
	waitfor.Until(c.t, 2*time.Minute, "the group's committed offsets at the input's end", func() bool {
		adm := c.admin()
		ends, err := adm.ListEndOffsets(ctx, "etl-in")
		if err != nil {
			return false
		}
		committed, err := adm.FetchOffsets(ctx, "etl")
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if co, ok := committed.Lookup("etl-in", o.Partition); !ok || co.At < o.Offset {
				done = false
			}
		})
		return done
	})
	final := readValues(t, c, "etl-out", kgo.ReadCommitted())
	counts := make(map[string]int, len(final))
	for _, v := range final {
		counts[v]++
	}
	missing, twice := 0, 0
	for i := 0; i < records; i++ {
		switch counts[strconv.Itoa(i)] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 || len(final) != records {
		t.Fatalf("the output read committed holds %d records: %d input records missing, %d more than once", len(final), missing, twice)
	}
	if _, d := progress(); d > 0 {
		t.Fatalf("the live reader saw %d duplicates", d)
	}
}
