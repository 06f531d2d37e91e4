package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// Log lines of a broker's registration (cluster.Register and claimBrokerID).
const (
	registeredLine = `msg="broker registered"`
	idHeldLine     = `msg="broker id held by another session`
)

// TestClusterCrashLoopRestarts kills the brokers of a 3-broker ZooKeeper
// cluster with SIGKILL one at a time, in turn, every few seconds for a
// minute, each restarted at once, under an idempotent acks=all producer.
// A broker restarted at once finds its ID still held by its previous run's
// ZooKeeper session (4 s here): every restart must wait for that session to
// expire and register, not exit, and nothing acknowledged may be lost or
// stored twice.
func TestClusterCrashLoopRestarts(t *testing.T) {
	t.Parallel()
	const (
		topic      = "crashloop"
		partitions = 4
		runFor     = 60 * time.Second
		every      = 4 * time.Second
	)
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, partitions)

	stop := make(chan struct{})
	acks, producerDone := produceContinuously(t, c, topic, stop)
	restarts := map[int32]int{}
	var took []time.Duration
	end := time.Now().Add(runFor)
	for i := 0; time.Now().Before(end); i++ {
		id := c.initial[i%len(c.initial)]
		node := c.nodes[id]
		killed := time.Now()
		c.signal(id, syscall.SIGKILL)
		// At once, with the same command line up.sh used.
		if node.proc == nil {
			node.proc = startProcess(t, fmt.Sprintf("broker%d", id), node.args...)
		} else {
			node.proc.start()
		}
		restarts[id]++
		// Each run of the process logs its registration once; waitLog
		// fails if the process exits first.
		node.proc.waitLog(registeredLine, restarts[id], 30*time.Second)
		took = append(took, time.Since(killed))
		t.Logf("kill %d: broker %d registered again %v after the kill; %d acknowledged so far", i+1, id, took[i].Round(time.Millisecond), acks.count())
		// The next kill comes `every` after this one, however soon the
		// broker came back: crashes at a fixed rate, not on a condition.
		time.Sleep(time.Until(killed.Add(every)))
	}
	close(stop)
	<-producerDone

	waits := 0
	for _, id := range c.initial {
		node := c.nodes[id]
		select {
		case <-node.proc.done:
			t.Fatalf("broker %d exited (status %d) after its last restart", id, node.proc.exitCode())
		default:
		}
		output := node.proc.log()
		waits += strings.Count(output, idHeldLine)
		if strings.Contains(output, "already registered by another live broker") {
			t.Errorf("broker %d refused its own ID after a restart", id)
		}
	}
	t.Logf("%d restarts, %d of them waited for the previous session; kill to registered: median %v; acknowledged %d (failed %d)",
		len(took), waits, median(took).Round(time.Millisecond), acks.count(), acks.failed)
	if waits == 0 {
		t.Fatal("no restart found its ID still held by the previous session: the test did not exercise the wait")
	}
	if acks.count() == 0 {
		t.Fatal("nothing was acknowledged")
	}
	adm := c.admin()
	waitfor.Until(c.t, 60*time.Second, "full replication at the end", func() bool { return c.fullyReplicated(adm, topic) })
	got := readAll(t, c, topic, partitions)
	checkAcknowledged(t, acks, got)
	checkAckedValuesOnce(t, acks, got)
}

// checkAckedValuesOnce compares by value: every acknowledged value is
// stored exactly once in the topic.
func checkAckedValuesOnce(t *testing.T, acks *ackLog, got map[int32][]ackedRecord) {
	t.Helper()
	stored := map[int64]int{}
	for _, recs := range got {
		for _, r := range recs {
			stored[r.value]++
		}
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	for _, recs := range acks.acked {
		for _, a := range recs {
			if n := stored[a.value]; n != 1 {
				t.Errorf("acknowledged value %d stored %d times, want once", a.value, n)
			}
		}
	}
}
