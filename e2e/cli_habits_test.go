package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCLIHabitsOfKafkaUsers: against a real broker process, the short
// flags rpk and kcat users type (-t -p -r -c -g -n -o -f -K -z) do what the
// long ones do, --version answers, and shell completion (cobra's
// __complete, which the bash, zsh and fish scripts call) offers the
// broker's topics and groups, and nothing, quickly, for a broker that
// does not answer.
func TestCLIHabitsOfKafkaUsers(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	mr := func(stdin string, args ...string) string {
		t.Helper()
		return run(t, time.Minute, stdin, millraceBin, append(args, "-b", b.addr)...)
	}
	if out := run(t, time.Minute, "", millraceBin, "--version"); out != run(t, time.Minute, "", millraceBin, "version") || !strings.HasPrefix(out, "millrace ") {
		t.Fatalf("--version printed %q", out)
	}
	if out := mr("", "topic", "create", "payments", "-p", "1", "-r", "1", "-c", "retention.ms=3600000"); !strings.Contains(out, "created topic payments (1 partitions, replication factor 1)") {
		t.Fatalf("topic create -p -r -c: %q", out)
	}
	if out := mr("", "topic", "describe", "payments"); !strings.Contains(out, "retention.ms") || !strings.Contains(out, "3600000") {
		t.Fatalf("topic describe after -c retention.ms=3600000:\n%s", out)
	}
	mr("k1:v1\nk2:v2\nk3:v3\n", "produce", "payments", "-K", ":", "-z", "lz4")
	if out := mr("", "consume", "payments", "-p", "0", "-o", "1", "-n", "2", "-f", `%o %k=%v\n`); out != "1 k2=v2\n2 k3=v3\n" {
		t.Fatalf("consume -p -o -n -f: %q", out)
	}
	if out := mr("", "consume", "payments", "-g", "billing", "--from-beginning", "-n", "3"); out != "v1\nv2\nv3\n" {
		t.Fatalf("consume -g -n: %q", out)
	}

	// __complete takes the word being completed last; -b goes before it.
	completeWord := func(brokers string, args ...string) []string {
		t.Helper()
		word := args[len(args)-1]
		out := run(t, time.Minute, "", millraceBin, append(append([]string{"__complete", "-b", brokers}, args[:len(args)-1]...), word)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[:len(lines)-1]
	}
	if got := completeWord(b.addr, "consume", ""); !slices.Contains(got, "payments") {
		t.Errorf("completing consume's topic: %q", got)
	}
	if got := completeWord(b.addr, "topic", "describe", "pay"); !slices.Equal(got, []string{"payments"}) {
		t.Errorf("completing topic describe pay: %q", got)
	}
	if got := completeWord(b.addr, "group", "describe", ""); !slices.Equal(got, []string{"billing"}) {
		t.Errorf("completing group describe: %q", got)
	}
	if got := completeWord(b.addr, "sink", "-t", "p"); !slices.Equal(got, []string{"payments"}) {
		t.Errorf("completing sink -t p: %q", got)
	}
	// Against no broker: nothing, and it returns (run's limit fails a Tab
	// that hangs; the completion's own bound is pipeline/cli's test).
	if got := completeWord("127.0.0.1:1", "consume", ""); len(got) != 0 {
		t.Errorf("completing against no broker: %q", got)
	}
}
