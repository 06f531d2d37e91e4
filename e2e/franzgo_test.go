package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// franz-go's own integration suite (pkg/kgo) against a millrace broker: the
// broadest conformance check there is short of Kafka's. Two tests are left
// out, each for a documented difference rather than a bug:
//   - TestTxnEtl needs transactions, which millrace does not have yet;
//   - TestConsumeRegex needs an internal topic to exist, and on Kafka that is
//     __consumer_offsets; millrace keeps committed offsets in the
//     coordination store (/consumers/<group>/offsets, as the seed design
//     does), so it has no internal topics to show.
func TestFranzGoIntegrationSuite(t *testing.T) {
	b := startBroker(t, "--set", "group.initial.rebalance.delay.ms=0")
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "10m", "-skip", "^(TestTxnEtl|TestConsumeRegex)$", "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+b.addr, "KGO_TEST_RF=1", "KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none")
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
