package monitor

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func sampleJSON(name, kind string, value float64, labels string, ts time.Time, source string) []byte {
	return fmt.Appendf(nil, `{"name":%q,"kind":%q,"value":%g,"labels":%s,"ts":%q,"source":%q}`,
		name, kind, value, labels, ts.Format(time.RFC3339Nano), source)
}

// addRaw decodes an ops record as the collector does and adds its samples.
func addRaw(c *counters, value []byte) {
	samples, _ := decodeOps(value)
	for _, s := range samples {
		c.add(s)
	}
}

func TestCountersToComponents(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		samples [][]byte
		now     time.Time
		want    []string // kind name source rate total stale
	}{
		{"one sample has a total but no rate yet",
			[][]byte{sampleJSON("millrace_tail_lines_read_total", "counter", 50, `{"input":"app"}`, at(0), "h:up")},
			at(1), []string{"agent tail:app h:up 0.0 50 false"}},
		{"rate between the last two samples",
			[][]byte{
				sampleJSON("millrace_lake_rows_total", "counter", 100, `{"sink":"clicks","topic":"clicks"}`, at(0), "h:up"),
				sampleJSON("millrace_lake_rows_total", "counter", 150, `{"sink":"clicks","topic":"clicks"}`, at(10), "h:up"),
				sampleJSON("millrace_lake_rows_total", "counter", 350, `{"sink":"clicks","topic":"clicks"}`, at(20), "h:up"),
			},
			at(21), []string{"sink clicks h:up 20.0 350 false"}},
		{"series of one component add up",
			[][]byte{
				sampleJSON("millrace_lake_rows_total", "counter", 0, `{"sink":"ops","topic":"a"}`, at(0), "h:up"),
				sampleJSON("millrace_lake_rows_total", "counter", 0, `{"sink":"ops","topic":"b"}`, at(0), "h:up"),
				sampleJSON("millrace_lake_rows_total", "counter", 10, `{"sink":"ops","topic":"a"}`, at(10), "h:up"),
				sampleJSON("millrace_lake_rows_total", "counter", 30, `{"sink":"ops","topic":"b"}`, at(10), "h:up"),
			},
			at(11), []string{"sink ops h:up 4.0 40 false"}},
		{"only accepted beacon events are throughput",
			[][]byte{
				sampleJSON("millrace_beacon_events_total", "counter", 10, `{"stream":"click","result":"accepted"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_events_total", "counter", 5, `{"stream":"click","result":"rejected"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_events_total", "counter", 30, `{"stream":"click","result":"accepted"}`, at(10), "h:up"),
				sampleJSON("millrace_beacon_events_total", "counter", 500, `{"stream":"click","result":"rejected"}`, at(10), "h:up"),
			},
			at(11), []string{"beacon click h:up 2.0 30 false"}},
		{"a reset counter counts from zero",
			[][]byte{
				sampleJSON("millrace_ship_records_sent_total", "counter", 1000, `{}`, at(0), "h:tail"),
				sampleJSON("millrace_ship_records_sent_total", "counter", 40, `{}`, at(10), "h:tail"),
			},
			at(11), []string{"agent ship h:tail 4.0 40 false"}},
		{"an older sample arriving late is ignored",
			[][]byte{
				sampleJSON("millrace_ship_records_sent_total", "counter", 100, `{}`, at(10), "h:tail"),
				sampleJSON("millrace_ship_records_sent_total", "counter", 50, `{}`, at(0), "h:tail"),
				sampleJSON("millrace_ship_records_sent_total", "counter", 200, `{}`, at(20), "h:tail"),
			},
			at(21), []string{"agent ship h:tail 10.0 200 false"}},
		{"sources stay apart; a silent one is stale",
			[][]byte{
				sampleJSON("millrace_ship_records_sent_total", "counter", 0, `{}`, at(0), "a:tail"),
				sampleJSON("millrace_ship_records_sent_total", "counter", 10, `{}`, at(10), "a:tail"),
				sampleJSON("millrace_ship_records_sent_total", "counter", 0, `{}`, at(100), "b:tail"),
				sampleJSON("millrace_ship_records_sent_total", "counter", 20, `{}`, at(110), "b:tail"),
			},
			at(111), []string{"agent ship a:tail 0.0 10 true", "agent ship b:tail 2.0 20 false"}},
		{"gauges, other counters and garbage are no components",
			[][]byte{
				sampleJSON("millrace_tail_files_open", "gauge", 3, `{}`, at(0), "h:up"),
				sampleJSON("go_gc_cycles_total", "counter", 3, `{}`, at(0), "h:up"),
				[]byte(`not json`),
				[]byte(`{"name":"x"}`),
			},
			at(1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounters(100)
			for _, s := range tc.samples {
				addRaw(c, s)
			}
			var got []string
			for _, comp := range c.components(tc.now, time.Minute) {
				got = append(got, fmt.Sprintf("%s %s %s %.1f %.0f %v", comp.Kind, comp.Name, comp.Source, comp.Rate, comp.Total, comp.Stale))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("components\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCountersLimitSeries(t *testing.T) {
	c := newCounters(2)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		addRaw(c, sampleJSON("millrace_lake_rows_total", "counter", 1, fmt.Sprintf(`{"sink":"s%d"}`, i), t0, "h:up"))
	}
	if n := len(c.components(t0, time.Minute)); n != 2 {
		t.Fatalf("%d components kept, want the limit 2", n)
	}
	if c.dropped != 3 {
		t.Fatalf("dropped %d, want 3", c.dropped)
	}
	// Known series still update at the limit.
	addRaw(c, sampleJSON("millrace_lake_rows_total", "counter", 21, `{"sink":"s0"}`, t0.Add(10*time.Second), "h:up"))
	for _, comp := range c.components(t0.Add(10*time.Second), time.Minute) {
		if comp.Name == "s0" && math.Abs(comp.Rate-2) > 1e-9 {
			t.Fatalf("s0 rate %v, want 2", comp.Rate)
		}
	}
}
