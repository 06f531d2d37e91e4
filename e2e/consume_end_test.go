package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestConsumeMissingTopicAndExitAtEnd: consume on a missing topic fails at
// once with one line; -e/--exit-at-end stops at the end offsets as of the
// start, from the beginning, from the end, from a group's commit and from
// --offset, with --max below and above what there is, also when a
// transaction's marker is a partition's last offset.
func TestConsumeMissingTopicAndExitAtEnd(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	consume := func(args ...string) []string {
		t.Helper()
		out := run(t, 30*time.Second, "", millraceBin, append(append([]string{"consume"}, args...), "-b", b.addr)...)
		return strings.Fields(out)
	}

	began := time.Now()
	_, stderr, err := runErr(30*time.Second, "", millraceBin, "consume", "nosuch", "--max", "1", "-b", b.addr)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("consume of a missing topic: %v (stderr %q), want exit 1", err, stderr)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "topic nosuch does not exist") {
		t.Fatalf("consume of a missing topic: stderr %q, want one line saying so", stderr)
	}
	t.Logf("consume of a missing topic failed after %v", time.Since(began).Round(time.Millisecond))

	b.createTopic(t, "ends", 3, nil)
	var lines []string
	for i := range 10 {
		lines = append(lines, "k"+strconv.Itoa(i)+":v"+strconv.Itoa(i))
	}
	run(t, 30*time.Second, strings.Join(lines, "\n")+"\n", millraceBin, "produce", "ends", "--key-separator", ":", "-b", b.addr)

	if got := consume("ends", "--from-beginning", "-e"); len(got) != 10 {
		t.Fatalf("-e from the beginning printed %d records, want 10: %v", len(got), got)
	}
	if got := consume("ends", "--from-beginning", "--max", "25", "--exit-at-end"); len(got) != 10 {
		t.Fatalf("--max 25 with 10 records and --exit-at-end printed %d, want 10", len(got))
	}
	if got := consume("ends", "--from-beginning", "--max", "4", "-e"); len(got) != 4 {
		t.Fatalf("--max 4 -e printed %d records, want 4", len(got))
	}
	if got := consume("ends", "-e"); len(got) != 0 {
		t.Fatalf("-e from the end printed %v, want nothing", got)
	}
	consume("ends", "--group", "g", "--from-beginning", "--max", "4")
	// Partitions the group has no commit on start at the log start.
	if got := consume("ends", "--group", "g", "--from-beginning", "-e"); len(got) != 6 {
		t.Fatalf("-e in a group that committed 4 of 10 printed %d records, want 6", len(got))
	}
	perPartition := map[string]int{}
	for _, p := range consume("ends", "--from-beginning", "-e", "--format", "%p") {
		perPartition[p]++
	}
	p, n := "", 0
	for part, count := range perPartition {
		if count > n {
			p, n = part, count
		}
	}
	if got := consume("ends", "--partition", p, "--offset", "1", "-e"); len(got) != n-1 {
		t.Fatalf("-e from offset 1 of partition %s (%d records) printed %d, want %d", p, n, len(got), n-1)
	}

	// A committed transaction ends partition 0 with its marker, an offset
	// no data record has.
	cl := b.client(t, kgo.TransactionalID("ends-txn"), kgo.DefaultProduceTopic("ends"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("t" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consume("ends", "--from-beginning", "-e"); len(got) != 12 {
		t.Fatalf("-e after a transaction printed %d records, want 12 (markers are not printed): %v", len(got), got)
	}
}

// TestConsumeGroupStopsOnSIGTERM: `millrace consume --group G` that has
// joined its group and waits for records exits promptly on SIGTERM,
// committing what it printed, instead of hanging in the group's leave.
func TestConsumeGroupStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "quiet", 2, nil)
	run(t, 30*time.Second, "a\nb\n", millraceBin, "produce", "quiet", "-b", b.addr)
	c := startProcess(t, "consume", "consume", "quiet", "--group", "g1", "--from-beginning", "-b", b.addr)
	adm := b.admin(t)
	waitfor.Until(t, 30*time.Second, "the consumer's group to commit both records", func() bool {
		committed, _ := groupProgress(t, adm, "g1", "quiet")
		return committed == 2
	})
	if !c.stop(syscall.SIGTERM, 10*time.Second) {
		t.Fatalf("consume --group did not exit within 10s of SIGTERM:\n%s", c.log())
	}
	if code := c.exitCode(); code != 0 {
		t.Fatalf("consume --group exited %d after SIGTERM:\n%s", code, c.log())
	}
}
