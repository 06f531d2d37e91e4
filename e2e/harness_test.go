// Package e2e runs millrace as real processes — the `millrace` binary built
// once per test run — against real clients: franz-go, kcat and kafka-python.
package e2e

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// millraceBin is the binary under test, built by TestMain.
var millraceBin string

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role, os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "millrace-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	millraceBin = filepath.Join(dir, "millrace")
	build := exec.Command("go", "build", "-o", millraceBin, "millrace/pipeline/cmd/millrace")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building millrace:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is one running millrace process whose output goes to a log file
// that is printed when the test fails.
type process struct {
	t       testing.TB
	name    string
	bin     string   // millraceBin unless set
	env     []string // added to the test's environment
	args    []string
	logPath string

	mu   sync.Mutex // guards the following
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

func startProcess(t testing.TB, name string, args ...string) *process {
	t.Helper()
	return startProcessOf(t, &process{t: t, name: name, bin: millraceBin, args: args})
}

// startRole runs this test binary as a client process playing role (see
// runRole), so a test can SIGKILL or SIGSTOP a client as it does a broker.
func startRole(t testing.TB, name, role string, args ...string) *process {
	t.Helper()
	return startProcessOf(t, &process{t: t, name: name, bin: os.Args[0], env: []string{roleEnv + "=" + role}, args: args})
}

func startProcessOf(t testing.TB, p *process) *process {
	t.Helper()
	name := p.name
	p.logPath = filepath.Join(t.TempDir(), name+".log")
	p.start()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 15*time.Second)
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				if w := warnings(b, 40); len(w) > 0 {
					t.Logf("--- %s log: warnings and errors ---\n%s", name, w)
				}
				t.Logf("--- %s log (last 4 KiB) ---\n%s", name, tail(b, 4096))
			}
		}
	})
	return p
}

func (p *process) start() {
	p.t.Helper()
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// stop sends sig and waits up to grace for the exit, then kills. It reports
// whether the process exited within grace.
func (p *process) stop(sig syscall.Signal, grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
		return false
	}
}

// exitCode is the exit status of a stopped process (-1 if killed by a signal).
func (p *process) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.ProcessState.ExitCode()
}

func (p *process) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// waitLog waits until p's log holds text at least n times, failing if p
// exits first or timeout passes.
func (p *process) waitLog(text string, n int, timeout time.Duration) {
	p.t.Helper()
	waitfor.Until(p.t, timeout, fmt.Sprintf("%s to log %q %d times", p.name, text, n), func() bool {
		p.exitedEarly(fmt.Sprintf("logging %q %d times", text, n))
		return strings.Count(p.log(), text) >= n
	})
}

// exitedEarly fails the test if p has exited, before what it was awaited
// for (a waitfor.Until's condition calls it, so an exit fails at once).
func (p *process) exitedEarly(before string) {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("%s exited (status %d) before %s:\n%s", p.name, p.exitCode(), before, tail([]byte(p.log()), 4096))
	default:
	}
}

// reportLastSeen returns a function to defer around a waitfor.Until: if
// the test fails between the two (the wait gave up, which names only what
// it awaited), it logs what the condition last found, as seen tells it.
// A process's log needs none: startProcessOf logs its tail on failure.
func reportLastSeen(t testing.TB, seen func() string) func() {
	failedBefore := t.Failed()
	return func() {
		if !failedBefore && t.Failed() {
			t.Logf("last seen: %s", seen())
		}
	}
}

// warnings returns the first n lines of a process log at level WARN or
// ERROR: what went wrong may be long before the log's last bytes.
func warnings(b []byte, n int) []byte {
	var out []byte
	for line := range bytes.Lines(b) {
		if n == 0 {
			break
		}
		if bytes.Contains(line, []byte("level=WARN")) || bytes.Contains(line, []byte("level=ERROR")) {
			out = append(out, line...)
			n--
		}
	}
	return out
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// broker is a `millrace broker` process with embedded coordination.
type broker struct {
	*process
	addr string
	data string
}

// startBroker runs a broker on a free loopback port and waits until it
// answers Kafka requests. extra are appended to its command line.
func startBroker(t testing.TB, extra ...string) *broker {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	data := t.TempDir()
	args := append([]string{"broker", "--listen", addr, "--data", data, "--id", "1"}, extra...)
	b := &broker{process: startProcess(t, "broker", args...), addr: addr, data: data}
	b.waitReady()
	return b
}

// restart stops the broker with sig and starts it again on the same address
// and data directory.
func (b *broker) restart(sig syscall.Signal) {
	b.t.Helper()
	b.stop(sig, 15*time.Second)
	b.start()
	b.waitReady()
}

// answers reports whether the broker at addr answers a request within a
// second, to a client with opts.
func answers(addr string, opts ...kgo.Opt) bool {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return cl.Ping(ctx) == nil
}

func (b *broker) waitReady() {
	b.t.Helper()
	waitfor.Until(b.t, 20*time.Second, fmt.Sprintf("the broker at %s to answer", b.addr), func() bool {
		b.exitedEarly("becoming ready")
		return answers(b.addr)
	})
}

// kafka is a single broker or a cluster, for helpers that need only its
// bootstrap addresses.
type kafka interface{ seeds() []string }

func (b *broker) seeds() []string { return []string{b.addr} }

// kafkaClient returns a franz-go client of k, closed with the test.
func kafkaClient(t testing.TB, k kafka, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.seeds()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// client returns a franz-go client for b, closed with the test.
func (b *broker) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return kafkaClient(t, b, opts...)
}

func (b *broker) admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(b.client(t))
}

// createTopic creates a topic or fails the test.
func (b *broker) createTopic(t testing.TB, name string, partitions int, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.admin(t).CreateTopic(ctx, int32(partitions), 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// run runs a command to completion with a timeout and returns its stdout;
// the test fails on a non-zero exit.
func run(t testing.TB, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := runErr(timeout, stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, errOut)
	}
	return out
}

func runErr(timeout time.Duration, stdin string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
