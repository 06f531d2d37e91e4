package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// franz-go's own integration suite (pkg/kgo) against millrace: the broadest
// conformance check there is short of Kafka's, TestTxnEtl (transactions:
// GroupTransactSession over a chain of topics) included. One test is left
// out, for a documented difference rather than a bug: TestConsumeRegex needs
// an internal topic to exist, and on Kafka that is __consumer_offsets;
// millrace keeps committed offsets and transaction state in the coordination
// store (docs/architecture.md §4), so it has no internal topics to show.
func runFranzGoSuite(t *testing.T, seeds string, rf string) {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "10m", "-skip", "^TestConsumeRegex$", "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+seeds, "KGO_TEST_RF="+rf, "KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("franz-go suite took %v", time.Since(start).Round(time.Second))
	if err != nil {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 200 {
			lines = lines[len(lines)-200:]
		}
		t.Fatalf("franz-go kgo suite failed: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if !strings.Contains(string(out), "ok  \tgithub.com/twmb/franz-go/pkg/kgo") {
		t.Fatalf("franz-go suite did not report ok:\n%s", out)
	}
}

// TestFranzGoIntegrationSuite runs the suite against one broker.
func TestFranzGoIntegrationSuite(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "group.initial.rebalance.delay.ms=0")
	runFranzGoSuite(t, b.addr, "1")
}

// TestFranzGoIntegrationSuiteCluster runs it against a 3-broker ZooKeeper
// cluster, every topic replicated three times.
func TestFranzGoIntegrationSuiteCluster(t *testing.T) {
	t.Parallel()
	c := startLocalClusterWith(t, 3, 1, "group.initial.rebalance.delay.ms=0")
	runFranzGoSuite(t, strings.Join(c.seeds(), ","), "3")
}
