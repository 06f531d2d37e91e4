package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClientCommandsWithHungBroker stops a broker with SIGSTOP while its
// ZooKeeper session (60 s here) keeps it registered: it accepts connections
// and never answers, as a broker stuck on its disk does. The status commands,
// given the hung broker as their first seed, still answer, with the hung
// broker's own figures left out (top within three reads, not five).
func TestClientCommandsWithHungBroker(t *testing.T) {
	const topic = "hung"
	c := startLocalClusterWith(t, 3, 1, "zookeeper.session.timeout.ms=60000")
	c.createReplicatedTopic(topic, 3)
	adm := c.admin()
	hung, others := c.notController(adm)
	c.signal(hung, syscall.SIGSTOP)
	t.Cleanup(func() { c.signal(hung, syscall.SIGCONT) })
	seeds := []string{c.nodes[hung].addr, c.nodes[others[0]].addr}

	start := time.Now()
	status, rows := c.clusterStatus(seeds)
	t.Logf("cluster status with broker %d hung (%v):\n%s", hung, time.Since(start).Round(time.Millisecond), status)
	if len(rows) != 3 {
		t.Fatalf("cluster status lists %d brokers, want the 3 registered (the hung one included)", len(rows))
	}
	for id, r := range rows {
		switch {
		case id == hung && (r.replicas != -1 || r.data != "-" || r.free != "-"):
			t.Errorf("hung broker %d shows disk figures %+v, want -", id, r)
		case id != hung && (r.replicas != 3 || r.data == "-" || r.free == "-"):
			t.Errorf("broker %d shows no disk figures", id)
		}
	}

	start = time.Now()
	out := run(t, 30*time.Second, "", millraceBin, "topic", "describe", topic, "--brokers", strings.Join(seeds, ","))
	t.Logf("topic describe (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	var led, sized int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 8 {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			continue // the heading or the topic's line
		}
		if f[1] == strconv.Itoa(int(hung)) {
			led++
			if f[5] != "?" || f[6] != "?" || f[7] != "-" {
				t.Errorf("partition %s led by the hung broker shows offsets %s %s, size %s; want ? ? -", f[0], f[5], f[6], f[7])
			}
		} else if f[5] != "?" && f[6] != "?" && f[7] != "-" {
			sized++
		}
	}
	if led != 1 || sized != 2 {
		t.Errorf("topic describe: %d partitions led by the hung broker, %d with offsets and size; want 1 and 2", led, sized)
	}

	start = time.Now()
	out = run(t, 90*time.Second, "", millraceBin, "top", "--once", "-b", strings.Join(seeds, ","))
	t.Logf("top --once (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "brokers 3") {
		t.Errorf("top does not count the 3 registered brokers")
	}
	if want := fmt.Sprintf("! log dirs: broker %d:", hung); !strings.Contains(out, want) {
		t.Errorf("top does not say %q", want)
	}
}
