package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// ackedRecord is a record the producer saw acknowledged.
type ackedRecord struct {
	offset int64
	value  int64
}

// ackLog collects acknowledgements from the producer's callbacks.
type ackLog struct {
	mu     sync.Mutex // guards the following
	acked  map[int32][]ackedRecord
	failed int
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, recs := range a.acked {
		n += len(recs)
	}
	return n
}

// produceContinuously writes increasing integers with an idempotent acks=all
// producer until stop is closed, then flushes.
func produceContinuously(t *testing.T, c *localCluster, topic string, stop <-chan struct{}) (*ackLog, <-chan struct{}) {
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedRecords(2000),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(2*time.Millisecond))
	acks := &ackLog{acked: map[int32][]ackedRecord{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-stop
			cancel()
		}()
		for n := int64(0); ctx.Err() == nil; n++ {
			if n%50 == 0 {
				// About 25k records/s: enough to always have writes in
				// flight at a kill, few enough to read back quickly.
				time.Sleep(2 * time.Millisecond)
			}
			v := n
			cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.FormatInt(v, 10))}, func(r *kgo.Record, err error) {
				acks.mu.Lock()
				defer acks.mu.Unlock()
				if err != nil {
					acks.failed++
					return
				}
				acks.acked[r.Partition] = append(acks.acked[r.Partition], ackedRecord{r.Offset, v})
			})
		}
		fctx, fcancel := context.WithTimeout(context.Background(), 70*time.Second)
		defer fcancel()
		if err := cl.Flush(fctx); err != nil {
			t.Errorf("flushing the producer: %v", err)
		}
	}()
	return acks, done
}

// readAll consumes every partition of topic from the start to its end.
func readAll(t *testing.T, c *localCluster, topic string, partitions int) map[int32][]ackedRecord {
	t.Helper()
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	for p := int32(0); p < int32(partitions); p++ {
		offsets[p] = kgo.NewOffset().AtStart()
		e, ok := ends.Lookup(topic, p)
		if !ok || e.Err != nil {
			t.Fatalf("end offset of partition %d: %v", p, e.Err)
		}
		want[p] = e.Offset
	}
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	got := map[int32][]ackedRecord{}
	complete := func() bool {
		for p, end := range want {
			if n := len(got[p]); end > 0 && (n == 0 || got[p][n-1].offset < end-1) {
				return false
			}
		}
		return true
	}
	for !complete() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the topic back: %v (got %d partitions' records)", ctx.Err(), len(got))
		}
		fetches.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch error on partition %d: %v", p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			v, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				t.Fatalf("partition %d offset %d: value %q", r.Partition, r.Offset, r.Value)
			}
			got[r.Partition] = append(got[r.Partition], ackedRecord{r.Offset, v})
		})
	}
	return got
}

// checkAcknowledged asserts that every acknowledged record is in the log at
// its offset, that no value is stored twice, and that values increase along
// each partition.
func checkAcknowledged(t *testing.T, acks *ackLog, got map[int32][]ackedRecord) {
	t.Helper()
	seen := map[int64]bool{}
	for p, recs := range got {
		for i, r := range recs {
			if seen[r.value] {
				t.Errorf("value %d stored twice (partition %d offset %d)", r.value, p, r.offset)
			}
			seen[r.value] = true
			if i > 0 && (r.value <= recs[i-1].value || r.offset <= recs[i-1].offset) {
				t.Errorf("partition %d out of order at offset %d: value %d after %d", p, r.offset, r.value, recs[i-1].value)
			}
		}
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	for p, recs := range acks.acked {
		byOffset := map[int64]int64{}
		for _, r := range got[p] {
			byOffset[r.offset] = r.value
		}
		for _, a := range recs {
			if v, ok := byOffset[a.offset]; !ok || v != a.value {
				t.Errorf("acknowledged value %d at partition %d offset %d is missing (found %d, present %v)", a.value, p, a.offset, v, ok)
			}
		}
	}
}

// killLeaders kills the leader of a random partition of topic with SIGKILL
// kills times, each once the producer behind acks has had 500 more records
// acknowledged (so that every leader dies with writes in flight), waits for
// a new leader, restarts the broker and waits for full replication. It
// returns how long each leadership move took.
func killLeaders(t *testing.T, c *localCluster, adm *kadm.Client, topic string, partitions, kills int, acks *ackLog) []time.Duration {
	t.Helper()
	var moves []time.Duration
	for i := 0; i < kills; i++ {
		before := acks.count()
		waitfor.Until(c.t, 30*time.Second, "acknowledgements before a kill", func() bool { return acks.count() >= before+500 })
		p := int32(rand.IntN(partitions))
		parts, err := c.partitions(adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		victim := parts[p].Leader
		start := time.Now()
		c.signal(victim, syscall.SIGKILL)
		waitfor.Until(c.t, 30*time.Second, "a new leader", func() bool {
			parts, err := c.partitions(adm, topic)
			return err == nil && parts[p].Leader >= 0 && parts[p].Leader != victim
		})
		moves = append(moves, time.Since(start))
		c.restart(victim)
		waitfor.Until(c.t, 60*time.Second, "full replication after a restart", func() bool { return c.fullyReplicated(adm, topic) })
		t.Logf("kill %d: partition %d leader %d, moved in %v, %d acknowledged so far", i+1, p, victim, moves[i].Round(time.Millisecond), acks.count())
	}
	return moves
}

// TestClusterFailoverLosesNothing kills the leader of a random partition
// with SIGKILL at least 20 times while an idempotent acks=all producer
// writes, then checks that every acknowledged record is stored exactly
// once, in order, and that all replicas are identical.
func TestClusterFailoverLosesNothing(t *testing.T) {
	const topic, partitions, kills = "failover", 6, 20
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, partitions)
	adm := c.admin()

	stop := make(chan struct{})
	acks, producerDone := produceContinuously(t, c, topic, stop)
	moves := killLeaders(t, c, adm, topic, partitions, kills, acks)
	close(stop)
	<-producerDone
	acked := acks.count()
	maxMove := time.Duration(0)
	for _, d := range moves {
		maxMove = max(maxMove, d)
	}
	t.Logf("leadership moves: %d, median %v, max %v; records acknowledged: %d (failed: %d)", len(moves), median(moves).Round(time.Millisecond), maxMove.Round(time.Millisecond), acked, acks.failed)
	if acked == 0 {
		t.Fatal("nothing was acknowledged")
	}
	waitfor.Until(c.t, 60*time.Second, "full replication at the end", func() bool { return c.fullyReplicated(adm, topic) })
	got := readAll(t, c, topic, partitions)
	checkAcknowledged(t, acks, got)
	c.checkReplicasIdentical(topic, partitions)
}
