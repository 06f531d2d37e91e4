// Package zktest starts real ZooKeeper servers for tests: one standalone
// server (Start) or an ensemble (StartEnsemble) on free loopback ports, each
// with its own temporary data directory, stopped when the test ends.
//
// The servers are the Debian package's (`zookeeper`, 3.8) run directly as
// java QuorumPeerMain with a generated zoo.cfg; `make deps` installs them.
// Every server runs with a short tick (TickTime) so tests can use short session
// timeouts: ZooKeeper clamps a client's session timeout to
// [2×TickTime, MaxSessionTimeout].
package zktest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// TickTime is every server's tick, ZooKeeper's unit of time for
	// heartbeats, session expiry checks and ensemble sync limits.
	TickTime = 250 * time.Millisecond
	// MinSessionTimeout is the shortest session timeout a server grants
	// (ZooKeeper's default, 2×TickTime).
	MinSessionTimeout = 2 * TickTime
	// MaxSessionTimeout is the longest session timeout a server grants.
	MaxSessionTimeout = 60 * time.Second

	// startTimeout bounds the wait for a server to serve requests.
	startTimeout = 60 * time.Second
	// stopTimeout bounds the wait for a killed server to exit.
	stopTimeout = 10 * time.Second
)

// Files of the Debian package. zookeeper.jar's manifest names the other jars
// it needs; slf4j-simple gives the server a log (to its log file here).
const (
	zookeeperJar = "/usr/share/java/zookeeper.jar"
	slf4jJar     = "/usr/share/java/slf4j-simple.jar"
)

// Server is one ZooKeeper server process. Its methods are safe for concurrent
// use.
type Server struct {
	t          testing.TB
	myid       int // 1-based id in an ensemble, 0 when standalone
	dir        string
	configPath string
	logPath    string
	clientPort int

	mu     sync.Mutex // guards the following
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts a standalone ZooKeeper server and waits until it serves
// requests. It is stopped when the test ends. A missing `zookeeper` package
// or java fails the test with a message naming `make deps`.
func Start(t testing.TB) *Server {
	t.Helper()
	requireInstalled(t)
	dir := t.TempDir()
	var lastErr error
	// A free port found now may be taken by another process before the server
	// binds it; a server that exits at once is retried on new ports.
	for attempt := 0; attempt < 3; attempt++ {
		s := &Server{t: t, dir: dir, clientPort: freePort(t)}
		s.configPath = filepath.Join(dir, "zoo.cfg")
		s.logPath = filepath.Join(dir, "server.log")
		config := baseConfig(filepath.Join(dir, "data"), s.clientPort)
		if err := writeServerFiles(s, config); err != nil {
			t.Fatalf("zktest: %v", err)
		}
		if err := s.launch(); err != nil {
			t.Fatalf("zktest: %v", err)
		}
		if lastErr = s.waitServing(startTimeout); lastErr == nil {
			t.Cleanup(s.cleanup)
			return s
		}
		running := s.Running()
		s.Stop()
		if running {
			// Alive but not serving: new ports would not help.
			break
		}
	}
	t.Fatalf("zktest: standalone server did not start: %v", lastErr)
	return nil
}

// Connect returns the server's client address, "127.0.0.1:PORT", in the form
// ZooKeeper clients take.
func (s *Server) Connect() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.clientPort)) }

// ClientPort returns the loopback port the server serves clients on.
func (s *Server) ClientPort() int { return s.clientPort }

// Running reports whether the server process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

func (s *Server) runningLocked() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop kills the server (SIGKILL, as a crash would) and waits for it to exit.
// Its data directory is kept, so Restart brings it back with its data. Stopping
// a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	// The server runs in its own process group; kill the whole group.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Errorf("zktest: kill server %d: %v", cmd.Process.Pid, err)
	}
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		s.t.Errorf("zktest: server %d did not exit within %v of SIGKILL", cmd.Process.Pid, stopTimeout)
	}
}

// cleanup stops the server at the end of its test, showing the end of its
// log when the test failed.
func (s *Server) cleanup() {
	if s.t.Failed() {
		s.t.Logf("zktest: server on port %d, last log lines:\n%s", s.clientPort, s.logTail(40))
	}
	s.Stop()
}

// Restart starts a stopped server again on the same ports and data directory
// and waits until it serves requests (in an ensemble: until it has joined a
// quorum). Restarting a running server does nothing.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Running() {
		return
	}
	if err := s.launch(); err != nil {
		s.t.Fatalf("zktest: %v", err)
	}
	if err := s.waitServing(startTimeout); err != nil {
		s.t.Fatalf("zktest: restart: %v", err)
	}
}

// launch starts the java process.
func (s *Server) launch() error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command("java",
		// Small and quick to start: these servers hold test-sized trees.
		"-Xmx256m", "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", zookeeperJar+":"+slf4jJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.configPath)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group so Stop can kill everything it started, and a
		// SIGKILL from the kernel if the test binary dies first: no orphans.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// waitServing polls the four-letter words until the server answers ruok with
// imok and srvr with a mode (standalone, leader or follower): ruok alone
// answers before an ensemble member has joined a quorum.
func (s *Server) waitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	for {
		if ok, _ := fourLetterWord(s.Connect(), "ruok"); ok == "imok" {
			if out, _ := fourLetterWord(s.Connect(), "srvr"); strings.Contains(out, "Mode: ") {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("server on port %d exited while starting; log tail:\n%s", s.clientPort, s.logTail(30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server on port %d not serving after %v; log tail:\n%s", s.clientPort, timeout, s.logTail(30))
		}
	}
}

// Mode returns the server's role as srvr reports it: "standalone", "leader"
// or "follower", or "" when it does not answer.
func (s *Server) Mode() string {
	out, err := fourLetterWord(s.Connect(), "srvr")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode)
		}
	}
	return ""
}

// logTail returns the last n lines of the server's log.
func (s *Server) logTail(n int) string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fourLetterWord sends one of ZooKeeper's four-letter commands and returns the
// answer, which the server ends by closing the connection.
func fourLetterWord(addr, word string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, word); err != nil {
		return "", err
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, bufio.NewReader(conn))
	return out.String(), err
}

// requireInstalled fails the test when the server cannot be run here.
func requireInstalled(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("zktest: java not found on PATH (%v): run `make deps`, which installs the Debian package zookeeper and its Java runtime", err)
	}
	for _, jar := range []string{zookeeperJar, slf4jJar} {
		if _, err := os.Stat(jar); err != nil {
			t.Fatalf("zktest: %s missing (%v): run `make deps`, which installs the Debian package zookeeper", jar, err)
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// baseConfig is the zoo.cfg every server shares.
func baseConfig(dataDir string, clientPort int) string {
	return fmt.Sprintf(`tickTime=%d
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
clientPortAddress=127.0.0.1
clientPort=%d
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
maxClientCnxns=0
# Test data is disposable; skipping fsync keeps the servers quick on shared disks.
forceSync=no
`, TickTime.Milliseconds(), MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds(), dataDir, clientPort)
}

// writeServerFiles writes a server's zoo.cfg and, in an ensemble, its myid.
func writeServerFiles(s *Server, config string) error {
	dataDir := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	if s.myid > 0 {
		if err := os.WriteFile(filepath.Join(dataDir, "myid"), []byte(strconv.Itoa(s.myid)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(s.configPath, []byte(config), 0o644)
}
