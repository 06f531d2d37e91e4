package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// TestClusterRestartAndDown: on a cluster of up.sh, `millrace cluster
// restart` starts a SIGKILLed broker again with up.sh's command line, and
// stops and starts a running one; another broker is restarted by hand from
// BROKER_CMD_N. down.sh then stops every broker of the cluster, those two
// included, before it deletes the directory: no process of the cluster is
// left.
func TestClusterRestartAndDown(t *testing.T) {
	t.Parallel()
	c := startLocalCluster(t, 3, 1)
	restart := func(id int32) int {
		t.Helper()
		out := run(t, 60*time.Second, "", millraceBin, "cluster", "restart", strconv.Itoa(int(id)), "--dir", c.dir)
		m := regexp.MustCompile(`broker \d+ restarted \(pid (\d+)\), listening on (\S+);`).FindStringSubmatch(out)
		if m == nil || m[2] != c.nodes[id].addr {
			t.Fatalf("cluster restart %d printed %q", id, out)
		}
		pid, _ := strconv.Atoi(m[1])
		return pid
	}
	brokersSeen := func(want int) {
		t.Helper()
		waitfor.Until(c.t, 60*time.Second, "every broker to see all three again", func() bool {
			for _, node := range c.nodes {
				if c.brokersSeenBy(node) != want {
					return false
				}
			}
			return true
		})
	}

	// Broker 1: killed, then restarted by the command.
	c.signal(1, syscall.SIGKILL)
	pid1 := restart(1)
	brokersSeen(3)
	if recorded := readState(t, filepath.Join(c.dir, "state"))["BROKER_PID_1"]; recorded != strconv.Itoa(pid1) {
		t.Fatalf("state has BROKER_PID_1=%s, the restarted broker is %d", recorded, pid1)
	}
	// Broker 3: running; the command stops it first.
	old3 := c.nodes[3].pid
	pid3 := restart(3)
	if processAlive(old3) || !processAlive(pid3) {
		t.Fatalf("restart of a running broker 3: old pid %d alive %v, new pid %d alive %v", old3, processAlive(old3), pid3, processAlive(pid3))
	}
	// Broker 2: killed, then restarted by hand, as the state file shows.
	c.signal(2, syscall.SIGKILL)
	c.restart(2)
	brokersSeen(3)

	down := exec.Command("../deployments/local/down.sh", "--dir", c.dir)
	if out, err := down.CombinedOutput(); err != nil {
		t.Fatalf("down.sh: %v\n%s", err, out)
	}
	if left := clusterProcesses(c.dir); len(left) > 0 {
		t.Fatalf("processes of the cluster still run after down.sh: %v", left)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("down.sh left %s: %v", c.dir, err)
	}
}

// clusterProcesses lists the live processes whose command line names the
// cluster directory: its brokers' data directories, its ZooKeeper configs.
func clusterProcesses(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !processAlive(pid) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(raw), "\x00", " ")
		if strings.Contains(cmd, "--data "+dir+"/broker") || strings.Contains(cmd, dir+"/zk") {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}
