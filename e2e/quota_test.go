package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuotaCLI: millrace quota set, list and delete against a broker
// process, for a user+client-id, the user default and the client-id
// default; what the CLI set is what kadm's DescribeClientQuotas reads
// back. Neither kafka-python 2.0.2 nor confluent-kafka 1.7.0 (Debian's)
// has a client quota API, and kcat has none, so only franz-go's kadm
// checks the wire beside the CLI.
func TestQuotaCLI(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	quota := func(args ...string) string {
		return run(t, time.Minute, "", millraceBin, append(append([]string{"quota"}, args...), "-b", b.addr)...)
	}
	quota("set", "--user", "alice", "--client-id", "app", "producer_byte_rate=1048576", "request_percentage=25")
	quota("set", "--user-default", "consumer_byte_rate=2097152")
	quota("set", "--client-default", "controller_mutation_rate=2.5")

	out := quota("list")
	for _, want := range []string{
		"{user=alice, client-id=app}", "producer_byte_rate=1048576", "request_percentage=25",
		"{user=<default>}", "consumer_byte_rate=2097152",
		"{client-id=<default>}", "controller_mutation_rate=2.5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("quota list lacks %q:\n%s", want, out)
		}
	}
	if out := quota("list", "--user", "alice"); !strings.Contains(out, "user=alice") || strings.Contains(out, "<default>") {
		t.Errorf("quota list --user alice:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := b.admin(t).DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(described) != 3 {
		t.Fatalf("kadm described %v (%v), want the 3 entities the CLI set", described, err)
	}

	quota("delete", "--user", "alice", "--client-id", "app", "request_percentage")
	quota("delete", "--user-default", "consumer_byte_rate")
	out = quota("list")
	if strings.Contains(out, "request_percentage") || strings.Contains(out, "user=<default>") || !strings.Contains(out, "producer_byte_rate=1048576") {
		t.Errorf("after delete:\n%s", out)
	}

	// A wrong key is refused before anything is sent, with the keys named.
	_, errOut, err := runErr(time.Minute, "", millraceBin, "quota", "set", "--client-default", "bytes=1", "-b", b.addr)
	if err == nil || !strings.Contains(errOut, "producer_byte_rate") {
		t.Errorf("set bytes=1: %v %s", err, errOut)
	}
}
