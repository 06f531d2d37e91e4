package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bench produce and bench consume with --broker-metrics read the broker's
// own CPU time, allocation and GC cycles from its /metrics before and after
// the run and print them per record; a URL that serves no broker metrics is
// an error, not a figure.
func TestBenchBrokerUsage(t *testing.T) {
	t.Parallel()
	metrics := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t, "--metrics-listen", metrics)
	url := "http://" + metrics + "/metrics"
	usage := regexp.MustCompile(`(?m)^broker: CPU (\d+\.\d\d)s, (\d+) ns/record; allocated (\d+\.\d) MB, (\d+\.\d) B/record; \d+ GC cycles, \S+ stop-the-world$`)
	for _, args := range [][]string{
		{"bench", "produce", "--topic", "usage", "--records", "20000", "--partitions", "2"},
		{"bench", "consume", "--topic", "usage", "--records", "20000"},
	} {
		out := run(t, 60*time.Second, "", millraceBin, append(args, "-b", b.addr, "--quiet", "--broker-metrics", url)...)
		m := usage.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no broker usage line in\n%s", args[1], out)
		}
		// The Go runtime counts every byte allocated, so serving 20,000
		// records shows; CPU time is in 10 ms ticks and may read zero.
		if allocated, _ := strconv.ParseFloat(m[3], 64); allocated <= 0 {
			t.Errorf("%s: broker allocated %s MB over the run, want more than 0", args[1], m[3])
		}
	}

	_, errOut, err := runErr(30*time.Second, "", millraceBin, "bench", "produce", "-b", b.addr, "--topic", "usage",
		"--records", "10", "--quiet", "--broker-metrics", "http://"+metrics+"/nothing-here")
	if err == nil || !strings.Contains(errOut, "broker metrics") {
		t.Fatalf("--broker-metrics at a URL without metrics: err %v, stderr %q; want an error about the broker metrics", err, errOut)
	}
}
