package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The client commands against a real broker, as a user runs them: topics,
// produce and consume (keys, partitions, formats), groups with lag and a
// reset, and one-line errors.
func TestCLICommands(t *testing.T) {
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t, "--metrics-listen", metricsAddr)
	mr := func(stdin string, args ...string) string {
		t.Helper()
		return run(t, 60*time.Second, stdin, millraceBin, append(args, "-b", b.addr)...)
	}
	if out := mr("", "topic", "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000"); !strings.Contains(out, "created topic orders (3 partitions") {
		t.Fatalf("topic create: %q", out)
	}
	if out := mr("", "topic", "list"); !strings.Contains(out, "orders") {
		t.Fatalf("topic list: %q", out)
	}
	mr("", "topic", "alter", "orders", "--config", "segment.bytes=1048576")

	// Keyed records land by murmur2: the same key always on one partition.
	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, "k"+string(rune('a'+i%3))+":v"+string(rune('0'+i%10)))
	}
	mr(strings.Join(lines, "\n")+"\n", "produce", "orders", "--key-separator", ":", "--compression", "zstd")
	out := mr("", "consume", "orders", "--from-beginning", "--max", "30", "--format", "%k %p")
	partitionOf := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("consume line %q", l)
		}
		if p, ok := partitionOf[f[0]]; ok && p != f[1] {
			t.Fatalf("key %s on partitions %s and %s", f[0], p, f[1])
		}
		partitionOf[f[0]] = f[1]
	}
	if len(partitionOf) != 3 {
		t.Fatalf("consumed keys %v, want ka, kb, kc", partitionOf)
	}

	// The broker's Prometheus metrics count what was produced.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `millrace_broker_produced_records_total{topic="orders"} 30`) {
		t.Errorf("broker /metrics does not count the 30 produced records:\n%.3000s", page)
	}
	if !regexp.MustCompile(`(?m)^millrace_broker_log_size_bytes\{topic="orders"\} [1-9]\d*$`).Match(page) ||
		!regexp.MustCompile(`(?m)^millrace_broker_log_dir_usable_bytes [1-9]`).Match(page) {
		t.Errorf("broker /metrics lacks the orders log size or the data volume's free bytes:\n%.3000s", page)
	}

	desc := mr("", "topic", "describe", "orders")
	for _, want := range []string{"partitions 3", "retention.ms=3600000", "segment.bytes=1048576", "LEADER", "ISR", "LATEST", "SIZE"} {
		if !strings.Contains(desc, want) {
			t.Errorf("topic describe lacks %q:\n%s", want, desc)
		}
	}
	// The SIZE column: the partitions that got records (murmur2 spreads
	// the three keys) have some bytes, the others none.
	rows := regexp.MustCompile(`(?m)^([0-2])\s+1\s+\d+\s+1\s+1\s+0\s+(\d+)\s+(\d+)B$`).FindAllStringSubmatch(desc, -1)
	if len(rows) != 3 {
		t.Errorf("topic describe: want 3 partition rows with their size in bytes:\n%s", desc)
	}
	for _, r := range rows {
		if (r[2] == "0") != (r[3] == "0") {
			t.Errorf("partition %s: latest offset %s, size %sB", r[1], r[2], r[3])
		}
	}

	// A group reads 10 records and commits exactly those: lag 20.
	mr("", "consume", "orders", "--group", "billing", "--from-beginning", "--max", "10")
	gd := mr("", "group", "describe", "billing")
	if !strings.Contains(gd, "total lag 20") || !strings.Contains(gd, "coordinator 1 ("+b.addr+")") {
		t.Errorf("group describe after reading 10 of 30 (lag 20, coordinator 1 at %s):\n%s", b.addr, gd)
	}
	if gl := mr("", "group", "list"); !strings.Contains(gl, "billing") {
		t.Errorf("group list: %q", gl)
	}
	mr("", "group", "reset", "billing", "--topic", "orders", "--to-latest")
	if gd := mr("", "group", "describe", "billing"); !strings.Contains(gd, "total lag 0") {
		t.Errorf("group describe after reset to latest:\n%s", gd)
	}
	mr("", "group", "reset", "billing", "--topic", "orders", "--to-earliest")
	if gd := mr("", "group", "describe", "billing"); !strings.Contains(gd, "total lag 30") {
		t.Errorf("group describe after reset to earliest:\n%s", gd)
	}

	// Errors: one line on stderr, non-zero exit.
	_, stderr, err := runErr(30*time.Second, "", millraceBin, "topic", "describe", "missing", "-b", b.addr)
	if err == nil || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "millrace topic describe:") {
		t.Errorf("describe of a missing topic: err %v, stderr %q", err, stderr)
	}
	mr("", "topic", "delete", "orders")
	if out := mr("", "topic", "list"); strings.Contains(out, "orders") {
		t.Errorf("topic still listed after delete: %q", out)
	}
}
