package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// `millrace bench latency --compare` runs the same fixed-rate load against a
// millrace broker and a kfake cluster, alternating, and reports both runs and
// the medians side by side, having consumed every acknowledged record.
func TestBenchLatencyCompare(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	other := fake.ListenAddrs()[0]

	// 500 records/s for 1s warm-up + 2s: 1,000 counted records per run.
	out := run(t, 60*time.Second, "", millraceBin, "bench", "latency", "-b", b.addr, "--compare", other,
		"--rate", "500", "--warmup", "1s", "--duration", "2s", "--partitions", "3", "--keys", "7", "--producers", "2")

	lines := strings.Split(strings.TrimSpace(out), "\n")
	quantiles := `p50 \S+ p99 \S+ p99\.9 \S+ max \S+`
	for i, target := range []string{b.addr, other} {
		if len(lines) < 4*(i+1) {
			t.Fatalf("report too short:\n%s", out)
		}
		head := regexp.MustCompile(`^run 1 against ` + regexp.QuoteMeta(target) +
			`: 500 records/s of 100 B, 3 partition\(s\), acks=all, 2 producer\(s\), 2s measured after 1s warm-up: (\d+) acked \(\d+/s\), (\d+) consumed$`)
		m := head.FindStringSubmatch(lines[4*i])
		// The pacer's schedule is exact: 1,000 records fall due in the
		// measured 2s, and every one acknowledged is consumed.
		if m == nil || m[1] != "1000" || m[2] != "1000" {
			t.Errorf("run line for %s: %q, want 1000 acked and 1000 consumed", target, lines[4*i])
		}
		if !regexp.MustCompile(`^  produce-ack  `+quantiles+`$`).MatchString(lines[4*i+1]) ||
			!regexp.MustCompile(`^  end-to-end   `+quantiles+`$`).MatchString(lines[4*i+2]) ||
			!regexp.MustCompile(`^  send lag     `+quantiles+`$`).MatchString(lines[4*i+3]) {
			t.Errorf("latency lines for %s:\n%s", target, strings.Join(lines[4*i+1:4*i+4], "\n"))
		}
	}
	table := strings.Join(lines[8:], "\n")
	if !regexp.MustCompile(`(?m)^medians of 1 run\(s\)\s+`+regexp.QuoteMeta(b.addr)+`\s+`+regexp.QuoteMeta(other)+`$`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^end-to-end p99\.9\s+\S+\s+\S+$`).MatchString(table) {
		t.Errorf("medians table:\n%s", table)
	}
}

// `millrace bench latency` against a 3-broker cluster creates its topic with
// replication factor 3 and measures at once: it waits until every partition's
// leader serves it, where listing the new topic's offsets straight after
// CreateTopics failed now and then with UNKNOWN_TOPIC_OR_PARTITION.
func TestBenchLatencyReplicated(t *testing.T) {
	t.Parallel()
	c := startLocalCluster(t, 3, 1)
	out := run(t, 60*time.Second, "", millraceBin, "bench", "latency", "-b", strings.Join(c.seeds(), ","),
		"--topic", "bench-rf3", "--partitions", "3", "--replication-factor", "3",
		"--rate", "500", "--warmup", "0s", "--duration", "2s", "--runs", "1", "--quiet")
	head := regexp.MustCompile(`(?m)^run 1 against \S+: 500 records/s of 100 B, 3 partition\(s\), acks=all, 1 producer\(s\), 2s measured after 0s warm-up: (\d+) acked \(\d+/s\), (\d+) consumed$`)
	if m := head.FindStringSubmatch(out); m == nil || m[1] != "1000" || m[2] != "1000" {
		t.Errorf("want 1000 records acknowledged and consumed:\n%s", out)
	}
	parts, err := c.partitions(c.admin(), "bench-rf3")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d has replicas %v, want 3", p.Partition, p.Replicas)
		}
	}
	if len(parts) != 3 {
		t.Errorf("the topic has %d partitions, want 3", len(parts))
	}
}
