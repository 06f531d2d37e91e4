package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// brokerUsage is what a broker process reports about its own resource use on
// its Prometheus /metrics endpoint (millrace broker --metrics-listen): the
// process collector's CPU seconds (utime+stime from /proc, in clock ticks of
// 10 ms) and the Go runtime's allocation and garbage collection counters.
type brokerUsage struct {
	cpuSeconds     float64 // process_cpu_seconds_total
	allocatedBytes float64 // go_memstats_alloc_bytes_total
	gcCycles       uint64  // go_gc_duration_seconds count
	gcPauseSeconds float64 // go_gc_duration_seconds sum: stop-the-world time
}

// scrapeBrokerUsage reads the broker's counters from its /metrics URL.
func scrapeBrokerUsage(ctx context.Context, url string) (brokerUsage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return brokerUsage{}, fmt.Errorf("broker metrics: %w", err)
	}
	// The text format: the endpoint would otherwise choose protobuf for a
	// client that accepts anything.
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return brokerUsage{}, fmt.Errorf("broker metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return brokerUsage{}, fmt.Errorf("broker metrics: %s answered %s", url, resp.Status)
	}
	return parseBrokerUsage(resp.Body)
}

// parseBrokerUsage picks the counters of brokerUsage out of a Prometheus text
// exposition; process_cpu_seconds_total is required (a broker that cannot
// read its own CPU time, off Linux, has none), the rest are optional.
func parseBrokerUsage(r io.Reader) (brokerUsage, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return brokerUsage{}, fmt.Errorf("broker metrics: %w", err)
	}
	first := func(name string) *dto.Metric {
		if f := families[name]; f != nil && len(f.Metric) > 0 {
			return f.Metric[0]
		}
		return nil
	}
	cpu := first("process_cpu_seconds_total")
	if cpu == nil || cpu.Counter == nil {
		return brokerUsage{}, fmt.Errorf("broker metrics: no process_cpu_seconds_total (is it a millrace broker on Linux?)")
	}
	u := brokerUsage{cpuSeconds: cpu.Counter.GetValue()}
	if m := first("go_memstats_alloc_bytes_total"); m != nil && m.Counter != nil {
		u.allocatedBytes = m.Counter.GetValue()
	}
	if m := first("go_gc_duration_seconds"); m != nil && m.Summary != nil {
		u.gcCycles, u.gcPauseSeconds = m.Summary.GetSampleCount(), m.Summary.GetSampleSum()
	}
	return u, nil
}

// brokerUsageMeter measures what a broker spent over a benchmark run: start
// scrapes the counters, and the returned report scrapes them again and prints
// the difference per record. A nil meter (no --broker-metrics) measures
// nothing.
type brokerUsageMeter struct {
	url    string
	before brokerUsage
}

// startBrokerUsage scrapes url once; an empty url gives a nil meter.
func startBrokerUsage(ctx context.Context, url string) (*brokerUsageMeter, error) {
	if url == "" {
		return nil, nil
	}
	before, err := scrapeBrokerUsage(ctx, url)
	if err != nil {
		return nil, err
	}
	return &brokerUsageMeter{url: url, before: before}, nil
}

// report prints the broker's CPU time, allocation and GC work since start,
// per record of the run.
func (m *brokerUsageMeter) report(ctx context.Context, w io.Writer, records int64) error {
	if m == nil || records <= 0 {
		return nil
	}
	after, err := scrapeBrokerUsage(ctx, m.url)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, formatBrokerUsage(m.before, after, records))
	return nil
}

// formatBrokerUsage says what the broker spent between two scrapes, in total
// and per record.
func formatBrokerUsage(before, after brokerUsage, records int64) string {
	cpu := after.cpuSeconds - before.cpuSeconds
	alloc := after.allocatedBytes - before.allocatedBytes
	n := float64(records)
	return fmt.Sprintf("broker: CPU %.2fs, %.0f ns/record; allocated %.1f MB, %.1f B/record; %d GC cycles, %s stop-the-world",
		cpu, cpu*1e9/n, alloc/1e6, alloc/n, after.gcCycles-before.gcCycles,
		roundSignificant(time.Duration((after.gcPauseSeconds-before.gcPauseSeconds)*float64(time.Second))))
}
