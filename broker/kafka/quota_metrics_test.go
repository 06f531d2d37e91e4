package kafka

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/quota"
)

// fakeUsage is a usageReader returning fixed usage, and the window it was
// asked for.
type fakeUsage struct {
	list   []quota.Usage
	within time.Duration
}

func (f *fakeUsage) Usage(_ time.Time, within time.Duration) []quota.Usage {
	f.within = within
	return append([]quota.Usage(nil), f.list...)
}

// TestQuotaCollectorSeries: one series per entity and kind with the
// entity's names as labels (an absent component empty), for usage, limit
// and throttle; entities come from the recent window only.
func TestQuotaCollectorSeries(t *testing.T) {
	t.Parallel()
	source := &fakeUsage{list: []quota.Usage{
		{Kind: quota.ConsumerByteRate, Entity: quota.ClientEntity("millrace-sink"), Quota: 1000, Rate: 1500, Throttle: 0.25},
		{Kind: quota.RequestPercentage, Entity: quota.UserClientEntity("alice", "app%201"), Quota: 50, Rate: 10},
	}}
	c := newQuotaCollector(source)
	want := `millrace_broker_quota_limit{client_id="app%201",kind="request_percentage",user="alice"} 50
millrace_broker_quota_limit{client_id="millrace-sink",kind="consumer_byte_rate",user=""} 1000
millrace_broker_quota_throttle_ratio{client_id="app%201",kind="request_percentage",user="alice"} 0
millrace_broker_quota_throttle_ratio{client_id="millrace-sink",kind="consumer_byte_rate",user=""} 0.25
millrace_broker_quota_usage{client_id="app%201",kind="request_percentage",user="alice"} 10
millrace_broker_quota_usage{client_id="millrace-sink",kind="consumer_byte_rate",user=""} 1500`
	if got := seriesText(t, c); got != want {
		t.Errorf("series\n%s\nwant\n%s", got, want)
	}
	if source.within != quotaMetricsRecent {
		t.Errorf("asked for usage within %v, want %v", source.within, quotaMetricsRecent)
	}
}

// seriesText is c's series in the text format, without the HELP and TYPE
// lines: the series are under test, not the prose.
func seriesText(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "millrace_broker_quota_limit", "millrace_broker_quota_throttle_ratio", "millrace_broker_quota_usage")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// TestQuotaCollectorBounded: past maxSeries pairs, the most throttled,
// then the fullest, keep series of their own, and the rest are summed per
// kind under <other>, so a flood of client IDs adds no series.
func TestQuotaCollectorBounded(t *testing.T) {
	t.Parallel()
	var list []quota.Usage
	for i := range 1000 {
		list = append(list, quota.Usage{Kind: quota.ConsumerByteRate, Entity: quota.ClientEntity(fmt.Sprintf("flood-%04d", i)), Quota: 100, Rate: 1})
	}
	list = append(list,
		quota.Usage{Kind: quota.ProducerByteRate, Entity: quota.UserEntity("quiet"), Quota: 100, Rate: 2},
		quota.Usage{Kind: quota.ConsumerByteRate, Entity: quota.UserEntity("throttled"), Quota: 100, Rate: 300, Throttle: 0.5},
		quota.Usage{Kind: quota.ConsumerByteRate, Entity: quota.UserEntity("full"), Quota: 100, Rate: 90},
	)
	c := newQuotaCollector(&fakeUsage{list: list})
	c.maxSeries = 3
	got := c.bounded(list)
	keys := make([]string, len(got))
	for i, u := range got {
		keys[i] = fmt.Sprintf("%s %s %v/%v %v", u.Entity, u.Kind, u.Rate, u.Quota, u.Throttle)
	}
	want := []string{
		"user=throttled consumer_byte_rate 300/100 0.5",
		"user=full consumer_byte_rate 90/100 0",
		"user=quiet producer_byte_rate 2/100 0",
		"user=<other>, client-id=<other> consumer_byte_rate 1000/100000 0",
	}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("bounded to\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	if n := testutil.CollectAndCount(c); n != 3*len(want) {
		t.Errorf("%d series, want %d: three gauges of %d label sets", n, 3*len(want), len(want))
	}
}

// TestQuotaCollectorOnTheBroker: a broker whose quotas are a Manager
// registers the collector, and a client throttled by its consumer quota
// shows with its throttle time.
func TestQuotaCollectorOnTheBroker(t *testing.T) {
	t.Parallel()
	manager := quota.NewManager(0)
	manager.Set(quota.ClientEntity("sink"), map[quota.Kind]float64{quota.ProducerByteRate: 1})
	reg := prometheus.NewPedanticRegistry()
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = manager }), withMetrics(reg))
	tb.createTopic("logs", 1, nil)
	cl := dial(t, tb.addr)
	produce := produceOne(t, "logs")
	cl.sendAs("sink", produce, 1)
	if resp := cl.readResponse(produce, 1).(*kmsg.ProduceResponse); resp.ThrottleMillis <= 0 {
		t.Fatalf("a produce over 1 byte/s was not throttled")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var throttle float64
	for _, f := range families {
		if f.GetName() != "millrace_broker_quota_throttle_ratio" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["client_id"] == "sink" && labels["kind"] == string(quota.ProducerByteRate) {
				throttle = m.GetGauge().GetValue()
			}
		}
	}
	if throttle <= 0 {
		t.Errorf("no throttle time for client-id sink in the gathered metrics")
	}
}
