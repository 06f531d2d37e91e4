package e2e

// Multi-broker e2e tests: a ZooKeeper and three brokers started by
// deployments/local/up.sh (the scripts `make cluster` runs), real processes
// killed with real signals, and franz-go clients.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"
	"millrace/internal/waitfor"
)

// localCluster is a cluster started by up.sh.
type localCluster struct {
	t       *testing.T
	dir     string
	state   map[string]string
	zk      string
	nodes   map[int32]*clusterNode
	initial []int32
	// clientOpts start the options of every client the harness makes
	// (TLS, SASL); empty for the plaintext clusters of up.sh.
	clientOpts []kgo.Opt
	// env is added to the brokers' environment (S3 credentials a parallel
	// test may not set in its own).
	env []string
}

// clusterNode is one broker. Started by up.sh it is known by PID; once
// restarted by the test it is a process the test owns.
type clusterNode struct {
	id   int32
	addr string
	args []string
	data string
	pid  int      // started by up.sh
	proc *process // restarted by the test
}

// startLocalCluster runs up.sh with n brokers and zkNodes ZooKeeper nodes and
// the short timeouts of these tests; down.sh runs at cleanup.
func startLocalCluster(t *testing.T, n, zkNodes int) *localCluster {
	t.Helper()
	return startLocalClusterWith(t, n, zkNodes)
}

// startLocalClusterWith is startLocalCluster with extra broker settings
// (name=value, passed as --set).
func startLocalClusterWith(t *testing.T, n, zkNodes int, settings ...string) *localCluster {
	t.Helper()
	return startLocalClusterUp(t, n, zkNodes, nil, settings...)
}

// startLocalClusterUp is startLocalClusterWith with extra up.sh options
// (--racks, --metrics).
func startLocalClusterUp(t *testing.T, n, zkNodes int, upArgs []string, settings ...string) *localCluster {
	t.Helper()
	return startLocalClusterEnv(t, n, zkNodes, nil, upArgs, settings...)
}

// startLocalClusterEnv is startLocalClusterUp with env (name=value) added
// to the brokers' environment, also when the test restarts one.
func startLocalClusterEnv(t *testing.T, n, zkNodes int, env, upArgs []string, settings ...string) *localCluster {
	t.Helper()
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		t.Fatalf("ZooKeeper is not installed (apt-get install -y zookeeper): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	scripts, err := filepath.Abs("../deployments/local")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{strconv.Itoa(n), "--zk", strconv.Itoa(zkNodes), "--dir", dir, "--bin", millraceBin,
		"--set", "zookeeper.session.timeout.ms=4000", "--set", "replica.lag.time.max.ms=3000",
		"--set", "leader.imbalance.check.interval.seconds=2", "--set", "request.timeout.ms=10000"}
	args = append(args, upArgs...)
	for _, s := range settings {
		args = append(args, "--set", s)
	}
	up := exec.Command(filepath.Join(scripts, "up.sh"), args...)
	up.Env = append(os.Environ(), env...)
	out, err := up.CombinedOutput()
	t.Cleanup(func() {
		if t.Failed() {
			for id := 1; id <= n; id++ {
				if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("broker%d", id), "broker.log")); err == nil {
					t.Logf("--- broker %d log (last 3 KiB) ---\n%s", id, tail(b, 3072))
				}
			}
		}
		down := exec.Command(filepath.Join(scripts, "down.sh"), "--dir", dir)
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("down.sh: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("up.sh: %v\n%s", err, out)
	}
	c := &localCluster{t: t, dir: dir, state: readState(t, filepath.Join(dir, "state")), nodes: map[int32]*clusterNode{}, env: env}
	c.zk = c.state["ZK_CONNECT"]
	for id := int32(1); id <= int32(n); id++ {
		key := strconv.Itoa(int(id))
		pid, _ := strconv.Atoi(c.state["BROKER_PID_"+key])
		args := strings.Fields(strings.Trim(c.state["BROKER_CMD_"+key], `"`))[1:]
		node := &clusterNode{id: id, addr: "127.0.0.1:" + c.state["BROKER_PORT_"+key], args: args, pid: pid,
			data: filepath.Join(dir, "broker"+key, "data")}
		c.nodes[id] = node
		c.initial = append(c.initial, id)
	}
	for _, node := range c.nodes {
		c.waitReady(node)
	}
	// Each broker learns of the others through its own ZooKeeper watch, a
	// moment apart (more so on an ensemble, whose servers lag each other):
	// wait until every broker lists all n, so that a topic created next can
	// be placed on all of them.
	waitfor.Until(c.t, 30*time.Second, "every broker to see all the brokers", func() bool {
		for _, node := range c.nodes {
			if c.brokersSeenBy(node) != n {
				return false
			}
		}
		return true
	})
	return c
}

// metadataFrom asks one broker itself (not any broker of the cluster) for
// its metadata of topics, or of every topic when none is named.
func metadataFrom(node *clusterNode, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(node.addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl)
}

// brokersSeenBy asks one broker how many live brokers it knows.
func (c *localCluster) brokersSeenBy(node *clusterNode) int {
	resp, err := metadataFrom(node)
	if err != nil {
		return 0
	}
	return len(resp.Brokers)
}

// knowsTopic reports whether one broker knows the topic with all its
// partitions, each with a leader.
func knowsTopic(node *clusterNode, topic string, partitions int) bool {
	resp, err := metadataFrom(node, topic)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != partitions {
		return false
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
	}
	return true
}

func readState(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			state[k] = v
		}
	}
	return state
}

func (c *localCluster) seeds() []string {
	var out []string
	for _, id := range c.initial {
		out = append(out, c.nodes[id].addr)
	}
	return out
}

func (c *localCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	return kafkaClient(c.t, c, append(slices.Clone(c.clientOpts), opts...)...)
}

func (c *localCluster) admin() *kadm.Client { return kadm.NewClient(c.client()) }

// signal sends sig to a broker and, for SIGKILL and SIGTERM, waits until
// it is gone.
func (c *localCluster) signal(id int32, sig syscall.Signal) {
	c.t.Helper()
	node := c.nodes[id]
	if node.proc != nil {
		if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
			node.proc.stop(sig, 15*time.Second)
			return
		}
		node.proc.mu.Lock()
		node.proc.cmd.Process.Signal(sig)
		node.proc.mu.Unlock()
		return
	}
	if err := syscall.Kill(node.pid, sig); err != nil {
		c.t.Fatalf("signal broker %d: %v", id, err)
	}
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return
	}
	// Not a waitfor.Until: past the deadline the broker is killed, not the
	// test failed, and the wait goes on until it is gone.
	deadline := time.Now().Add(15 * time.Second)
	for processAlive(node.pid) {
		if time.Now().After(deadline) {
			syscall.Kill(node.pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive reports whether pid runs (a zombie counts as gone).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// restart starts a stopped broker again with its original command line.
func (c *localCluster) restart(id int32) {
	c.t.Helper()
	node := c.nodes[id]
	if node.proc != nil {
		node.proc.start()
	} else {
		node.proc = startProcessOf(c.t, &process{t: c.t, name: fmt.Sprintf("broker%d", id), bin: millraceBin, env: c.env, args: node.args})
	}
	c.waitReady(node)
}

func (c *localCluster) waitReady(node *clusterNode) {
	c.t.Helper()
	waitfor.Until(c.t, 30*time.Second, fmt.Sprintf("broker %d at %s ready", node.id, node.addr), func() bool {
		return answers(node.addr, c.clientOpts...)
	})
}

// partitions returns the topic's partitions as Metadata reports them.
func (c *localCluster) partitions(adm *kadm.Client, topic string) (kadm.PartitionDetails, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// fullyReplicated reports whether every partition has a live leader and all
// replicas in the ISR.
func (c *localCluster) fullyReplicated(adm *kadm.Client, topic string) bool {
	parts, err := c.partitions(adm, topic)
	if err != nil {
		return false
	}
	for _, p := range parts {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
			return false
		}
	}
	return true
}

// createReplicatedTopic creates a topic with RF 3 and min.insync.replicas=2
// and waits until every partition has a leader and every broker knows it.
func (c *localCluster) createReplicatedTopic(topic string, partitions int) {
	c.t.Helper()
	adm := c.admin()
	two := "2"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, int32(partitions), 3, map[string]*string{"min.insync.replicas": &two}, topic)
	if err != nil || resp.Err != nil {
		c.t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	waitfor.Until(c.t, 20*time.Second, "the new topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
	// The controller's answer can come before the other brokers have read
	// the new topic from ZooKeeper; a client bootstrapped from one of those
	// would be told the topic does not exist (kcat -G exits on that).
	waitfor.Until(c.t, 20*time.Second, "every broker to know the new topic", func() bool {
		for _, node := range c.nodes {
			if !knowsTopic(node, topic, partitions) {
				return false
			}
		}
		return true
	})
}

// readLogDirect reads a partition's whole log from a stopped broker's data
// directory, as raw batches.
func readLogDirect(t *testing.T, dataDir, topic string, partition int32) []byte {
	t.Helper()
	dir := filepath.Join(dataDir, "logs", fmt.Sprintf("%s-%d", topic, partition))
	l, err := log.Open(dir, log.DefaultConfig(), nil)
	if err != nil {
		t.Fatalf("opening %s: %v", dir, err)
	}
	defer l.Close()
	var out []byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatalf("reading %s at %d: %v", dir, off, err)
		}
		b, err := s.ReadAll()
		next := s.NextOffset()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		if next <= off {
			break
		}
		off = next
	}
	return out
}

// stopAll stops every broker cleanly (for reading their logs).
func (c *localCluster) stopAll() {
	for _, id := range c.initial {
		c.signal(id, syscall.SIGTERM)
	}
}

// checkReplicasIdentical stops the brokers and compares every partition's
// log byte for byte across its replicas.
func (c *localCluster) checkReplicasIdentical(topic string, partitions int) {
	c.t.Helper()
	c.stopAll()
	for p := int32(0); p < int32(partitions); p++ {
		var first []byte
		for i, id := range c.initial {
			b := readLogDirect(c.t, c.nodes[id].data, topic, p)
			if i == 0 {
				first = b
				continue
			}
			if !bytes.Equal(first, b) {
				c.t.Errorf("partition %d: broker %d's log (%d bytes) differs from broker %d's (%d bytes)", p, id, len(b), c.initial[0], len(first))
			}
		}
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
