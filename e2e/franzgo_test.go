package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// franz-go's own integration suite (pkg/kgo) against a millrace broker: the
// broadest conformance check there is short of Kafka's. TestTxnEtl needs
// transactions, which millrace does not have yet.
func TestFranzGoIntegrationSuite(t *testing.T) {
	b := startBroker(t, "--set", "group.initial.rebalance.delay.ms=0")
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "10m", "-skip", "TestTxnEtl", "github.com/twmb/franz-go/pkg/kgo")
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
