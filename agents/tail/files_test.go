package tail

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

// openUnder counts this process's descriptors on files under dir.
func openUnder(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

func TestMaxOpenFiles(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	const files, per = 20, 30
	for i := range files {
		appendLines(t, filepath.Join(dir, fmt.Sprintf("f%02d.log", i)), fmt.Sprintf("f%02d", i), 0, per)
	}
	cfg := testConfig(dir, data)
	cfg.MaxOpenFiles = 3
	h := start(t, c, cfg, ship.Config{})
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	// The test's own writes open files under dir too: never sample then.
	var writing sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			writing.Lock()
			if n := int64(openUnder(t, dir)); n > peak.Load() {
				peak.Store(n)
			}
			writing.Unlock()
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	cons := newConsumer(t, c)
	cons.waitFor(t, files*per)
	// Files that grow after being closed are reopened by identity and offset.
	writing.Lock()
	for i := range files {
		appendLines(t, filepath.Join(dir, fmt.Sprintf("f%02d.log", i)), fmt.Sprintf("f%02d", i), per, per+5)
	}
	writing.Unlock()
	got := cons.settle(t, files*(per+5))
	close(done)
	wg.Wait()
	for i := range files {
		wantLines(t, got, fmt.Sprintf("f%02d", i), 0, per+5)
	}
	if len(got) != files*(per+5) {
		t.Fatalf("got %d records, want %d", len(got), files*(per+5))
	}
	if p := peak.Load(); p > 3 {
		t.Fatalf("held %d descriptors at once, cap is 3", p)
	}
	if g := testutil.ToFloat64(h.tailer.metrics.filesOpen); g > 3 {
		t.Fatalf("files_open gauge %v above the cap", g)
	}
}

func TestCloseInactiveReleasesDeletedFiles(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	for i := range 5 {
		appendLines(t, filepath.Join(dir, fmt.Sprintf("f%d.log", i)), fmt.Sprintf("f%d", i), 0, 10)
	}
	cfg := testConfig(dir, data)
	cfg.CloseInactive = 2 * time.Second
	h := start(t, c, cfg, ship.Config{})
	newConsumer(t, c).waitFor(t, 50)
	if n := openUnder(t, dir); n == 0 {
		t.Fatal("expected files still open right after reading")
	}
	for i := range 5 {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("f%d.log", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Until(t, 20*time.Second, "descriptors of deleted files to be released", func() bool { return openUnder(t, dir) == 0 })
	waitfor.Until(t, 20*time.Second, "deleted files to leave the followed set", func() bool {
		h.tailer.mu.Lock()
		defer h.tailer.mu.Unlock()
		return len(h.tailer.files) == 0
	})
}

// TestBrokerOutagePausesReading stalls every produce request: reading must
// stop once the producer's buffer is full, the checkpoint must not move,
// and everything must arrive once the broker answers again.
func TestBrokerOutagePausesReading(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	const total = 4000 // ~1 MiB of records; the buffer holds ~130
	appendLines(t, path, "o", 0, total)
	var down atomic.Bool
	down.Store(true)
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if down.Load() {
			c.SleepControl(func() { <-release })
		} else {
			c.DropControl()
		}
		return nil, nil, false
	})
	sc := ship.Config{MaxBatchBytes: 8 << 10, MaxBufferedBytes: 32 << 10, MaxBufferedRecords: 1000}
	h := start(t, c, testConfig(dir, data), sc)
	waitfor.Until(t, 20*time.Second, "the buffer to fill", func() bool { return h.shipper.BufferedRecords() > 0 })
	// Nothing signals that reading paused: the tailer gets time in which
	// it would have read on, had it not.
	time.Sleep(300 * time.Millisecond)
	read := testutil.ToFloat64(h.tailer.metrics.lines)
	if read >= total/2 {
		t.Fatalf("read %v of %d lines while the broker was down: reading did not pause", read, total)
	}
	if off := registryOffset(t, data, path); off != 0 {
		t.Fatalf("checkpoint moved to %d with nothing acknowledged", off)
	}
	down.Store(false)
	close(release)
	got := newConsumer(t, c).waitFor(t, total)
	wantLines(t, got, "o", 0, total)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 20*time.Second, "the checkpoint to reach the end", func() bool { return registryOffset(t, data, path) == fi.Size() })
}

// TestRestartLosesNothing kills the tailer mid-stream (no clean shutdown,
// producer buffer dropped), restarts it from the registry, and checks every
// line arrived, with any duplicate carrying the same event_id.
func TestRestartLosesNothing(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	paths := []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")}
	const total = 6000
	writer := func(from, to int) {
		for i := from; i < to; i += 100 {
			for _, p := range paths {
				appendLines(t, p, filepath.Base(p), i, i+100)
			}
			time.Sleep(time.Millisecond) // paced, so the tailer reads while the files grow
		}
	}
	writer(0, 1000)
	h := start(t, c, testConfig(dir, data), ship.Config{Linger: 20 * time.Millisecond})
	done := make(chan struct{})
	go func() {
		defer close(done)
		writer(1000, total/2)
	}()
	waitfor.Until(t, 20*time.Second, "some progress", func() bool { return testutil.ToFloat64(h.tailer.metrics.lines) > 1500 })
	h.kill()
	<-done
	h2 := start(t, c, testConfig(dir, data), ship.Config{})
	writer(total/2, total)
	// Lines re-sent after the kill count towards the records, so wait for
	// every distinct line rather than for 2*total records (a loss still
	// fails: waitFor gives up when no record comes for a while).
	cons := newConsumer(t, c)
	got := cons.waitFor(t, 2*total)
	for len(lineSet(got)) < 2*total {
		got = cons.waitFor(t, len(got)+1)
	}
	h2.stop()
	for _, p := range paths {
		wantLines(t, got, filepath.Base(p), 0, total)
	}
	ids := map[string]string{} // source@offset -> event_id
	dups := 0
	for _, l := range got {
		k := fmt.Sprintf("%s@%d", l.Source, l.Offset)
		if id, ok := ids[k]; ok {
			dups++
			if id != l.EventID {
				t.Fatalf("line %s re-sent with event_id %s, first %s", k, l.EventID, id)
			}
		}
		ids[k] = l.EventID
	}
	t.Logf("%d records, %d duplicates after the kill", len(got), dups)
}
