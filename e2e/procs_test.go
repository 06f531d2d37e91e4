package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pid is the process id of p's current run.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// kill stops p at once with SIGKILL, like a crash.
func (p *process) kill() {
	p.stop(syscall.SIGKILL, 5*time.Second)
}

// restartAfter starts p again (same arguments) after pause.
func (p *process) restartAfter(pause time.Duration) {
	p.t.Helper()
	time.Sleep(pause)
	p.start()
}

// fdTargets lists what the descriptors of process pid point at (paths,
// "socket:[…]", "anon_inode:…"); a file deleted while open ends in
// " (deleted)".
func fdTargets(t testing.TB, pid int) []string {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("listing descriptors of %d: %v", pid, err)
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		out = append(out, target)
	}
	return out
}

// countUnder counts targets that are files under dir.
func countUnder(targets []string, dir string) int {
	n := 0
	for _, target := range targets {
		if strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// stopFor stops the broker with SIGTERM, keeps it down for down, then
// starts it again on the same address and data and waits until it serves.
func (b *broker) stopFor(down time.Duration) {
	b.t.Helper()
	b.stop(syscall.SIGTERM, 15*time.Second)
	time.Sleep(down)
	b.start()
	b.waitReady()
}

// peakRSSKiB reads a process's peak resident set size (VmHWM) from /proc.
func peakRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kib, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
