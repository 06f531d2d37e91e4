package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// TestSinkZombieWorker: a sink worker is SIGSTOPped past its session
// timeout while its idle-timeout cut is under way, its files written and
// not published; a replacement takes the partition over and lands the same
// records and more in windows cut elsewhere; then the paused worker is
// SIGCONTed. Its publish is refused (the group generation check), and the
// lake holds every event exactly once — on the filesystem store and on
// versitygw.
func TestSinkZombieWorker(t *testing.T) {
	t.Parallel()
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		zombieScenario(t, "file://"+root, nil)
		checkLake(t, root+"/clicks/**/*.parquet", zombieWant)
		if l := leftovers(t, root); len(l) != 0 {
			t.Errorf("temporary files left: %v", l)
		}
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		server := startVersitygw(t)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s3 := server.newBucket(t, ctx, "warehouse")
		// The sink processes read their credentials from the environment;
		// t.Setenv is not allowed in a parallel test, and every S3 test
		// sets these same values.
		os.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", s3SecretKey)
		zombieScenario(t, "s3://warehouse/lake", []string{"--s3-endpoint", server.endpoint()})
		checkS3Lake(t, ctx, s3, "warehouse", zombieWant)
	})
}

// zombieWant is the events per hour zombieScenario produces.
var zombieWant = func() map[string]int {
	want := map[string]int{}
	for i := 0; i < zombieTotal; i++ {
		_, h := clickEvent(i, 2, "")
		want[h]++
	}
	return want
}()

const zombieTotal = 700

func zombieScenario(t *testing.T, out string, extra []string) {
	const (
		topic = "clicks"
		group = "lake-zombie"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	// The first worker stops itself (SIGSTOP) when its first window's idle
	// cut comes, right before it would check its generation and publish:
	// the worst moment for a long pause.
	zombie := startSink(t, b, "sink-zombie", group, topic, out, append([]string{"--stop-before-publish", "1"}, extra...)...)
	produceClicks(t, b, topic, 0, 300, 2, nil)
	waitStopped(t, zombie, 30*time.Second)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(zombie.pid(), syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume) // runs before the process's own cleanup stops it

	// More records before the replacement starts: its first window holds
	// 0..499, so its file names differ from the paused worker's 0..299.
	produceClicks(t, b, topic, 300, 500, 2, nil)
	replacement := startSink(t, b, "sink-replacement", group, topic, out, extra...)
	waitLanded(t, b, group, topic, time.Minute, replacement)
	produceClicks(t, b, topic, 500, zombieTotal, 2, nil)
	waitLanded(t, b, group, topic, time.Minute, replacement)
	if c := strings.Count(zombie.log(), "stop-before-publish: stopping"); c != 1 {
		t.Fatalf("the paused worker stopped %d times, want once", c)
	}

	resume()
	zombie.waitLog("publish refused: the partition has moved to another member", 1, 30*time.Second)
	for _, p := range []*process{zombie, replacement} {
		if !p.stop(syscall.SIGTERM, 30*time.Second) || p.exitCode() != 0 {
			t.Errorf("%s: status %d after SIGTERM", p.name, p.exitCode())
		}
	}
}

// waitStopped waits until p is stopped by a signal (state T in /proc).
func waitStopped(t *testing.T, p *process, timeout time.Duration) {
	t.Helper()
	waitfor.Until(t, timeout, p.name+" stopped", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		return i > 0 && len(stat) > i+2 && stat[i+2] == 'T'
	})
}
