package zktest

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Ensemble is a ZooKeeper ensemble of several servers on loopback. Nodes are
// numbered from 0 in its methods (ZooKeeper's myid is the index plus one).
type Ensemble struct {
	t       testing.TB
	servers []*Server
}

// StartEnsemble starts an ensemble of n servers (n ≥ 1; 3 is usual) and waits
// until every one serves requests. It is stopped when the test ends.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	requireInstalled(t)
	if n < 1 {
		t.Fatalf("zktest: ensemble of %d servers", n)
	}
	e := &Ensemble{t: t}
	type ports struct{ client, quorum, election int }
	all := make([]ports, n)
	var servers strings.Builder
	for i := range all {
		all[i] = ports{freePort(t), freePort(t), freePort(t)}
		fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d\n", i+1, all[i].quorum, all[i].election)
	}
	root := t.TempDir()
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("zk%d", i+1))
		s := &Server{t: t, myid: i + 1, dir: dir, clientPort: all[i].client}
		s.configPath = filepath.Join(dir, "zoo.cfg")
		s.logPath = filepath.Join(dir, "server.log")
		// initLimit and syncLimit are in ticks: generous, because followers
		// on a busy two-core test machine may lag a second or two.
		config := baseConfig(filepath.Join(dir, "data"), s.clientPort) +
			"initLimit=40\nsyncLimit=20\n" + servers.String()
		if err := writeServerFiles(s, config); err != nil {
			t.Fatalf("zktest: %v", err)
		}
		e.servers = append(e.servers, s)
	}
	t.Cleanup(e.stopAll)
	for _, s := range e.servers {
		if err := s.launch(); err != nil {
			t.Fatalf("zktest: %v", err)
		}
	}
	// The servers elect a leader together, so wait for them in parallel.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range e.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.waitServing(startTimeout)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("zktest: ensemble node %d: %v", i, err)
		}
	}
	return e
}

// Connect returns the connect string naming every node,
// "127.0.0.1:P1,127.0.0.1:P2,...".
func (e *Ensemble) Connect() string {
	addrs := make([]string, len(e.servers))
	for i, s := range e.servers {
		addrs[i] = s.Connect()
	}
	return strings.Join(addrs, ",")
}

// Size returns the number of nodes.
func (e *Ensemble) Size() int { return len(e.servers) }

// Server returns node i.
func (e *Ensemble) Server(i int) *Server { return e.servers[i] }

// Stop kills node i (SIGKILL) and waits for it to exit; its data is kept.
func (e *Ensemble) Stop(i int) { e.servers[i].Stop() }

// Start restarts a stopped node i and waits until it has rejoined a quorum.
func (e *Ensemble) Start(i int) { e.servers[i].Restart() }

// Leader returns the index of the node that reports itself leader, or -1.
func (e *Ensemble) Leader() int {
	for i, s := range e.servers {
		if s.Running() && s.Mode() == "leader" {
			return i
		}
	}
	return -1
}

func (e *Ensemble) stopAll() {
	for _, s := range e.servers {
		s.cleanup()
	}
}
