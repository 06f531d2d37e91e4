package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPacerSchedule(t *testing.T) {
	p := newPacer(50_000, 0) // one record every 20µs
	for _, c := range []struct {
		elapsed time.Duration
		due     int64
	}{
		{0, 1}, // record 0 is due at once
		{19 * time.Microsecond, 1},
		{20 * time.Microsecond, 2},
		{time.Second - 1, 50_000},
		{10 * time.Second, 500_001},
	} {
		if got := p.dueBy(c.elapsed); got != c.due {
			t.Errorf("dueBy(%s) = %d, want %d", c.elapsed, got, c.due)
		}
	}
	if got := p.due(50_000); got != time.Second {
		t.Errorf("due(50000) = %s, want 1s", got)
	}

	// A rate that does not divide a second, started late: the offset
	// shifts every due time and nothing is due before it.
	p = newPacer(3, 5*time.Millisecond)
	if got := p.dueBy(4 * time.Millisecond); got != 0 {
		t.Errorf("dueBy before the offset = %d, want 0", got)
	}
	if got, want := p.due(2), 5*time.Millisecond+666_666_666; got != want {
		t.Errorf("due(2) = %s, want %s", got, want)
	}
	// Over a long run the count stays exact: no drift from rounding.
	if got := p.dueBy(5*time.Millisecond + time.Hour - 1); got != 3*3600 {
		t.Errorf("dueBy(1h) = %d, want %d", got, 3*3600)
	}
}

// The pacer sends every record once, in order, never before it is due, and
// catches up on whatever fell due while the sender was held up.
func TestPacerRunSendsOnSchedule(t *testing.T) {
	p := newPacer(2_000, 0)
	const n = 100 // 50ms of records
	base := time.Now()
	var sent []int64
	p.run(context.Background(), base, n, func(i int64, due time.Duration) {
		if now := time.Since(base); now < due {
			t.Errorf("record %d sent at %s, before it was due at %s", i, now, due)
		}
		if due != p.due(i) {
			t.Errorf("record %d stamped %s, want %s", i, due, p.due(i))
		}
		if i == 10 {
			time.Sleep(10 * time.Millisecond) // a held-up send: 20 records fall due meanwhile
		}
		sent = append(sent, i)
	})
	if len(sent) != n {
		t.Fatalf("sent %d records, want %d", len(sent), n)
	}
	for i, r := range sent {
		if r != int64(i) {
			t.Fatalf("send %d was record %d", i, r)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	p.run(ctx, time.Now(), n, func(int64, time.Duration) { calls++ })
	if calls != 0 {
		t.Errorf("a cancelled run sent %d records", calls)
	}
}

func TestLatencyRecorder(t *testing.T) {
	r := newLatencyRecorder()
	var values []time.Duration
	for i := 1; i <= 1000; i++ {
		values = append(values, time.Duration(i)*time.Microsecond)
	}
	r.record(values...)
	q := r.quantiles()
	within := func(name string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -want/1000 || d > want/1000 {
			t.Errorf("%s = %s, want %s within 0.1%%", name, got, want)
		}
	}
	within("p50", q.p50, 500*time.Microsecond)
	within("p99", q.p99, 990*time.Microsecond)
	within("p99.9", q.p999, 999*time.Microsecond)
	within("max", q.max, time.Millisecond)

	// The progress line's interval holds what came since it was last taken.
	if _, n := r.takeInterval(); n != 1000 {
		t.Errorf("first interval counted %d, want 1000", n)
	}
	r.record(2 * time.Minute) // beyond the range: clamped, not lost
	iq, n := r.takeInterval()
	if n != 1 || iq.max < 59*time.Second {
		t.Errorf("second interval: %d values, max %s; want 1 value near a minute", n, iq.max)
	}
	if q := r.quantiles(); q.max < 59*time.Second {
		t.Errorf("run max %s after a 2-minute value, want about a minute", q.max)
	}
}

func TestBenchLatencyReport(t *testing.T) {
	o := benchLatencyOptions{rate: 50_000, size: 100, partitions: 1, acks: "all", producers: 1,
		duration: 20 * time.Second, warmup: 5 * time.Second}
	run := func(target string, scale time.Duration) latencyRun {
		return latencyRun{target: target, partitions: 6, acked: 1_000_000, consumed: 1_000_000, measured: o.duration,
			ack:      latencyQuantiles{p50: 412 * scale, p99: 1021 * scale, p999: 2345 * scale, max: 9876 * scale},
			endToEnd: latencyQuantiles{p50: 500 * scale, p99: 1100 * scale, p999: 3500 * scale, max: 12000 * scale},
			sendLag:  latencyQuantiles{p50: 20 * scale, p99: 300 * scale, p999: 800 * scale, max: 1234 * scale}}
	}
	var out bytes.Buffer
	run("127.0.0.1:9092", time.Microsecond).printRun(&out, 2, o)
	want := "run 2 against 127.0.0.1:9092: 50000 records/s of 100 B, 6 partition(s), acks=all, 1 producer(s), 20s measured after 5s warm-up: 1000000 acked (50000/s), 1000000 consumed\n" +
		"  produce-ack  p50 412µs p99 1.02ms p99.9 2.35ms max 9.88ms\n" +
		"  end-to-end   p50 500µs p99 1.1ms p99.9 3.5ms max 12ms\n" +
		"  send lag     p50 20µs p99 300µs p99.9 800µs max 1.23ms\n"
	if out.String() != want {
		t.Errorf("run report:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	o.acks = "0"
	run("127.0.0.1:9092", time.Microsecond).printRun(&out, 1, o)
	if !strings.Contains(out.String(), "  produce-ack  none: with acks=0") {
		t.Errorf("acks=0 run report shows an acknowledgement latency:\n%s", out.String())
	}

	// Medians per address: runs scaled 1, 3 and 2 give the scale-2 run.
	out.Reset()
	a := []latencyRun{run("A:1", time.Microsecond), run("A:1", 3*time.Microsecond), run("A:1", 2*time.Microsecond)}
	b := []latencyRun{run("B:2", 10*time.Microsecond), run("B:2", 30*time.Microsecond), run("B:2", 20*time.Microsecond)}
	printMedians(&out, [][]latencyRun{a, b})
	wantTable := `medians of 3 run(s)  A:1     B:2
produce-ack p50      824µs   8.24ms
produce-ack p99      2.04ms  20.4ms
produce-ack p99.9    4.69ms  46.9ms
produce-ack max      19.8ms  198ms
end-to-end p50       1ms     10ms
end-to-end p99       2.2ms   22ms
end-to-end p99.9     7ms     70ms
end-to-end max       24ms    240ms
send lag p99         600µs   6ms
send lag max         2.47ms  24.7ms
`
	if out.String() != wantTable {
		t.Errorf("medians:\n%s\nwant:\n%s", out.String(), wantTable)
	}
	if got := median([]time.Duration{4, 1, 3, 2}); got != 2 {
		t.Errorf("median of an even count = %d, want 2 (mean of the middle two, rounded down)", got)
	}
}

func TestBenchLatencyRejectsBadOptions(t *testing.T) {
	good := benchLatencyOptions{rate: 10, duration: time.Second, size: 100, partitions: 1, replication: 1,
		producers: 1, consumers: 1, runs: 1}
	if err := good.validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for name, change := range map[string]func(*benchLatencyOptions){
		"zero rate":        func(o *benchLatencyOptions) { o.rate = 0 },
		"no duration":      func(o *benchLatencyOptions) { o.duration = 0 },
		"negative warm-up": func(o *benchLatencyOptions) { o.warmup = -time.Second },
		"record too small": func(o *benchLatencyOptions) { o.size = 7 },
		"negative keys":    func(o *benchLatencyOptions) { o.keys = -1 },
		"no producers":     func(o *benchLatencyOptions) { o.producers = 0 },
		"no consumers":     func(o *benchLatencyOptions) { o.consumers = 0 },
		"no runs":          func(o *benchLatencyOptions) { o.runs = 0 },
		"no record at all": func(o *benchLatencyOptions) { o.rate = 0.5 },
	} {
		o := good
		change(&o)
		if err := o.validate(); !errors.Is(err, errUsage) {
			t.Errorf("%s: validate() = %v, want a usage error", name, err)
		}
	}
	var stderr bytes.Buffer
	if code := Main([]string{"bench", "latency", "--record-size", "4"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--record-size must be at least 8") {
		t.Errorf("exit %d, stderr %q; want 2 and the record size error", code, stderr.String())
	}
}
