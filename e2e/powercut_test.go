package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestPowerCut simulates a power cut under an acks=all idempotent producer
// and a consumer that commits what it reads: the broker runs with its
// hidden --hold-unsynced-writes, which keeps every write not yet fsynced in
// the process's memory, so SIGKILL loses exactly what a power cut would.
//
// With millrace.flush.on.ack every acknowledged record is there exactly
// once after the restart, and the committed offset is not above the
// recovered log end. Without it (Kafka's default, acknowledged from the page
// cache) the same cut loses acknowledged records and leaves the committed
// offset above the log end: the layer does drop what was not fsynced, so the
// first half can fail.
func TestPowerCut(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name       string
		flushOnAck bool
	}{{"flush-on-ack", true}, {"page-cache", false}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, "--hold-unsynced-writes")
			const topic = "powercut"
			flushOnAck := fmt.Sprint(mode.flushOnAck)
			b.createTopic(t, topic, 1, map[string]*string{"millrace.flush.on.ack": &flushOnAck})

			acked, committed := produceAndCommitUntilCut(t, b, topic, b.kill)
			b.restart(syscall.SIGKILL) // already dead: starts it again
			got := afterCut(t, b, topic, acked, committed)
			if !mode.flushOnAck {
				if got.lost == 0 || got.committed <= got.end {
					t.Fatalf("without flush on ack the cut lost %d acknowledged records and left the committed offset %d at or below the log end %d: the layer dropped nothing", got.lost, got.committed, got.end)
				}
				return
			}
			got.check(t)
		})
	}
}

// TestPowerCutCluster cuts the power of a whole 3-broker cluster at once
// (replication factor 3, min.insync.replicas 2, the broker-wide
// millrace.log.flush.on.ack): every acknowledged record is on an fsynced
// disk of every ISR member (the leader fsyncs before it acknowledges,
// followers before they fetch past what they have), so whichever becomes
// leader after the restart has them all. The old leader comes back only
// once a former follower leads.
func TestPowerCutCluster(t *testing.T) {
	t.Parallel()
	const topic = "powercut-cluster"
	c := startLocalClusterWith(t, 3, 1, "millrace.log.flush.on.ack=true")
	// Every broker again, through the power-cut layer.
	for _, id := range c.initial {
		c.signal(id, syscall.SIGTERM)
		node := c.nodes[id]
		node.args = append(node.args, "--hold-unsynced-writes")
		node.proc = startProcess(t, fmt.Sprintf("broker%d", id), node.args...)
		c.waitReady(node)
	}
	waitfor.Until(c.t, 30*time.Second, "every broker to see all the brokers", func() bool {
		for _, node := range c.nodes {
			if c.brokersSeenBy(node) != 3 {
				return false
			}
		}
		return true
	})
	c.createReplicatedTopic(topic, 1)
	adm := c.admin()
	parts, err := c.partitions(adm, topic)
	if err != nil || len(parts) != 1 {
		t.Fatalf("partitions of %s: %v %v", topic, parts, err)
	}
	oldLeader := parts[0].Leader

	acked, committed := produceAndCommitUntilCut(t, c, topic, func() {
		for _, id := range c.initial {
			p := c.nodes[id].proc
			p.mu.Lock()
			p.cmd.Process.Signal(syscall.SIGKILL)
			p.mu.Unlock()
		}
		for _, id := range c.initial {
			c.nodes[id].proc.kill() // waits for the exit
		}
	})
	var followers []int32
	for _, id := range c.initial {
		if id != oldLeader {
			followers = append(followers, id)
			c.nodes[id].proc.start()
		}
	}
	for _, id := range followers {
		c.waitReady(c.nodes[id])
	}
	waitfor.Until(c.t, time.Minute, "a former follower to lead", func() bool {
		parts, err := c.partitions(adm, topic)
		return err == nil && len(parts) == 1 && parts[0].Err == nil && parts[0].Leader >= 0 && parts[0].Leader != oldLeader
	})
	// The old leader comes back as a follower of the new one; until then
	// it may still be named the group's coordinator.
	c.nodes[oldLeader].proc.start()
	c.waitReady(c.nodes[oldLeader])
	afterCut(t, c, topic, acked, committed).check(t)
}

// cutResult is what a power cut left of partition 0.
type cutResult struct {
	acked     int   // records acknowledged before the cut
	records   int   // records in the log after it
	end       int64 // the log end offset after it
	lost      int   // acknowledged records missing
	twice     int   // records stored more than once
	committed int64 // the reader's committed offset after it
}

// afterCut reads what the restarted k holds of partition 0 of topic and
// compares it with the acknowledged values and the last offset the reader
// was told it had committed.
//
// The recovered log end is found by producing a marker record with acks=all:
// it lands at the log end, and once it is acknowledged the high watermark
// is past everything before it. (Right after a restart the high watermark
// of a replicated partition is behind until the followers fetch again.)
func afterCut(t *testing.T, k kafka, topic string, acked map[string]bool, committed int64) cutResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const marker = "marker"
	producer := kafkaClient(t, k, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	rec, err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte(marker)}).First()
	if err != nil {
		t.Fatalf("marker after the cut: %v", err)
	}
	counts := consumeValues(t, k, topic, rec.Offset+1)
	if counts[marker] != 1 {
		t.Fatalf("marker read %d times", counts[marker])
	}
	delete(counts, marker)
	adm := kadm.NewClient(kafkaClient(t, k))
	r := cutResult{acked: len(acked), records: len(counts), end: rec.Offset}
	for v := range acked {
		if counts[v] == 0 {
			r.lost++
		}
	}
	for _, n := range counts {
		if n > 1 {
			r.twice++
		}
	}
	// A commit cut off by the cut may still have landed, so the stored
	// offset is at least the last one answered.
	fetched, err := adm.FetchOffsets(ctx, "powercut-reader")
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := fetched.Lookup(topic, 0)
	if stored.At < committed {
		t.Fatalf("committed offset %d after the restart, %d was committed before", stored.At, committed)
	}
	r.committed = stored.At
	t.Logf("%d records acknowledged, %d in the log after the cut (end offset %d), %d acknowledged ones lost, %d stored twice, committed offset %d",
		r.acked, r.records, r.end, r.lost, r.twice, r.committed)
	return r
}

// check fails the test unless the cut lost nothing acknowledged, stored
// nothing twice and left the committed offset within the log.
func (r cutResult) check(t *testing.T) {
	t.Helper()
	if r.lost > 0 || r.twice > 0 {
		t.Fatalf("%d acknowledged records lost, %d records stored twice", r.lost, r.twice)
	}
	if r.committed > r.end {
		t.Fatalf("committed offset %d above the recovered log end %d", r.committed, r.end)
	}
}

// produceAndCommitUntilCut produces records "record-N" with an acks=all
// idempotent producer while a reader commits the offsets it has read (a
// simple commit, as a sink does after landing them), and stops both once at
// least 1,000 records were acknowledged and something was committed, with a
// call of cut, which cuts the power. It returns the acknowledged values and
// the last offset committed.
func produceAndCommitUntilCut(t *testing.T, k kafka, topic string, cut func()) (acked map[string]bool, committed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A small buffer makes many small batches, so the cut falls mid-stream.
	producer, err := kgo.NewClient(kgo.SeedBrokers(k.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(200))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		ackedSet   = map[string]bool{}
		lastCommit int64
		enough     = make(chan struct{})
		once       sync.Once
		progress   = make(chan struct{}, 1) // a commit happened
	)
	check := func() { // under mu
		if len(ackedSet) >= 1000 && lastCommit > 0 {
			once.Do(func() { close(enough) })
		}
	}
	produceCtx, stopProducing := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := int64(0); produceCtx.Err() == nil; i++ {
			// Keep within a few batches of the reader, so the cut finds
			// both at work whichever is slower to start.
			for {
				mu.Lock()
				ahead := i - lastCommit
				mu.Unlock()
				if ahead < 2000 {
					break
				}
				select {
				case <-progress:
				case <-produceCtx.Done():
					return
				}
			}
			value := fmt.Sprintf("record-%d", i)
			producer.Produce(produceCtx, &kgo.Record{Value: []byte(value)}, func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					ackedSet[value] = true
					check()
					mu.Unlock()
				}
			})
		}
	}()

	reader, err := kgo.NewClient(kgo.SeedBrokers(k.seeds()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(reader)
	readCtx, stopReading := context.WithCancel(ctx)
	read := make(chan error, 1)
	go func() {
		for readCtx.Err() == nil {
			fetches := reader.PollFetches(readCtx)
			var next int64 = -1
			fetches.EachRecord(func(r *kgo.Record) { next = r.Offset + 1 })
			if next < 0 {
				continue
			}
			offsets := kadm.Offsets{}
			offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: next, LeaderEpoch: -1})
			resp, err := adm.CommitOffsets(readCtx, "powercut-reader", offsets)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				if readCtx.Err() == nil {
					read <- err
				}
				break
			}
			mu.Lock()
			lastCommit = next
			check()
			mu.Unlock()
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		close(read)
	}()

	select {
	case <-enough:
	case err := <-read:
		t.Fatalf("reader: %v", err)
	case <-ctx.Done():
		t.Fatal("no 1,000 acknowledged records and committed offset within a minute")
	}
	// The cut, with produces and perhaps a commit in flight: the stored
	// offset is read back after the restart.
	cut()
	stopReading()
	for range read { // errors from the dead broker are expected
	}
	reader.Close()
	stopProducing()
	<-produced
	// Every record the producer saw acknowledged by now was answered
	// before the cut: the broker is gone and the producer is closed before
	// the restart.
	producer.Close()
	mu.Lock()
	defer mu.Unlock()
	return ackedSet, lastCommit
}

// consumeValues reads partition 0 of topic from the start up to end and
// counts each record value.
func consumeValues(t *testing.T, k kafka, topic string, end int64) map[string]int {
	t.Helper()
	counts := map[string]int{}
	if end == 0 {
		return counts
	}
	cl := kafkaClient(t, k, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for next := int64(0); next < end; {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read up to offset %d of %d: %v", next, end, err)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			counts[string(r.Value)]++
			next = r.Offset + 1
		})
	}
	return counts
}
