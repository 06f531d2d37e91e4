package cli

import (
	"strings"
	"testing"
)

func TestParseBrokerUsage(t *testing.T) {
	const exposition = `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1.5e-05
go_gc_duration_seconds{quantile="1"} 0.0004
go_gc_duration_seconds_sum 0.002
go_gc_duration_seconds_count 12
# HELP go_memstats_alloc_bytes_total Total number of bytes allocated in heap until now, even if released already.
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 5e+07
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 3.25
`
	after, err := parseBrokerUsage(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := brokerUsage{cpuSeconds: 3.25, allocatedBytes: 5e7, gcCycles: 12, gcPauseSeconds: 0.002}
	if after != want {
		t.Fatalf("parsed %+v, want %+v", after, want)
	}
	before := brokerUsage{cpuSeconds: 1.25, allocatedBytes: 1e7, gcCycles: 2, gcPauseSeconds: 0.001}
	got := formatBrokerUsage(before, after, 10_000_000)
	const line = "broker: CPU 2.00s, 200 ns/record; allocated 40.0 MB, 4.0 B/record; 10 GC cycles, 1ms stop-the-world"
	if got != line {
		t.Fatalf("got  %q\nwant %q", got, line)
	}

	if _, err := parseBrokerUsage(strings.NewReader("go_goroutines 7\n")); err == nil || !strings.Contains(err.Error(), "process_cpu_seconds_total") {
		t.Fatalf("metrics without the CPU counter: error %v, want one naming process_cpu_seconds_total", err)
	}
}
