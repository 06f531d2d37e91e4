package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// zkMode asks a ZooKeeper node for its role (leader, follower, standalone)
// with the srvr four-letter word; "" when it does not answer.
func zkMode(port string) string {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return ""
	}
	b, _ := io.ReadAll(conn)
	for _, line := range strings.Split(string(b), "\n") {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// TestClusterZooKeeperNodeLossChangesNothing runs three brokers on a
// three-node ZooKeeper ensemble and kills the ensemble's leader while a
// producer and a consumer work: neither sees an error, every acknowledged
// record is consumed, and no partition changes leader.
func TestClusterZooKeeperNodeLossChangesNothing(t *testing.T) {
	const topic, partitions = "zk-ensemble", 3
	c := startLocalCluster(t, 3, 3)
	c.createReplicatedTopic(topic, partitions)
	adm := c.admin()
	// Brokers learn of the new topic from their own ZooKeeper watches a
	// moment apart; the admin client may ask one that has not yet.
	var before kadm.PartitionDetails
	waitfor.Until(c.t, 20*time.Second, "every broker to know the new topic", func() bool {
		var err error
		before, err = c.partitions(adm, topic)
		return err == nil
	})

	producer := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	consumer := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	stop := make(chan struct{})
	var produced atomic.Int64 // how many records the producer has issued
	var prodWG, consWG sync.WaitGroup
	var mu sync.Mutex // guards the following
	var produceErrs, fetchErrs []error
	acked := map[int64]bool{}
	consumed := map[int64]int{}

	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		for n := int64(0); ; n++ {
			produced.Store(n)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			v := n
			producer.Produce(context.Background(), &kgo.Record{Value: []byte(strconv.FormatInt(v, 10))}, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					produceErrs = append(produceErrs, err)
					return
				}
				acked[v] = true
			})
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	consWG.Add(1)
	go func() {
		defer consWG.Done()
		for ctx.Err() == nil {
			fetches := consumer.PollFetches(ctx)
			mu.Lock()
			fetches.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					fetchErrs = append(fetchErrs, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) {
				v, err := strconv.ParseInt(string(r.Value), 10, 64)
				if err != nil {
					fetchErrs = append(fetchErrs, err)
					return
				}
				consumed[v]++
			})
			mu.Unlock()
		}
	}()

	// Three seconds of traffic through a whole ensemble before its leader
	// is killed.
	time.Sleep(3 * time.Second)
	victim := 0
	for i := 1; i <= 3; i++ {
		if zkMode(c.state["ZK_PORT_"+strconv.Itoa(i)]) == "leader" {
			victim = i
		}
	}
	if victim == 0 {
		t.Fatal("no ZooKeeper node says it is the leader")
	}
	pid, _ := strconv.Atoi(c.state["ZK_PID_"+strconv.Itoa(victim)])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("killed ZooKeeper node %d (the ensemble's leader)", victim)
	// Longer than the brokers' session timeout (4 s), so a broker that
	// lost its session would have shown it.
	time.Sleep(6 * time.Second)
	lateFrom := produced.Load() // issued well after the node died
	// Six more seconds of records issued with the node long dead.
	time.Sleep(6 * time.Second)
	during, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatalf("metadata with a ZooKeeper node down: %v", err)
	}
	close(stop)
	prodWG.Wait()
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := producer.Flush(fctx); err != nil {
		t.Fatalf("flushing: %v", err)
	}
	fcancel()
	waitfor.Until(c.t, 30*time.Second, "every acknowledged record to be consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for v := range acked {
			if consumed[v] == 0 {
				return false
			}
		}
		return true
	})
	cancel()
	consWG.Wait()
	t.Logf("%d records acknowledged and consumed, %v after the ZooKeeper node died", len(acked), time.Since(killed).Round(time.Second))

	if len(produceErrs) > 0 {
		t.Errorf("%d produce errors, first: %v", len(produceErrs), produceErrs[0])
	}
	if len(fetchErrs) > 0 {
		t.Errorf("%d fetch errors, first: %v", len(fetchErrs), fetchErrs[0])
	}
	for v, n := range consumed {
		if n > 1 {
			t.Errorf("value %d consumed %d times", v, n)
		}
	}
	for p, d := range during {
		if d.Leader != before[p].Leader || len(d.ISR) != len(d.Replicas) {
			t.Errorf("partition %d changed while a ZooKeeper node was down: leader %d isr %v, before leader %d isr %v",
				p, d.Leader, d.ISR, before[p].Leader, before[p].ISR)
		}
	}
	late := 0
	for v := range acked {
		if v >= lateFrom {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no record issued 6 s or more after the ZooKeeper node died was acknowledged")
	}
}
