package ship

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// latencySampling is how many acknowledged records share one observation
// of the acknowledgement latency. Reading the clock and updating the
// histogram for every record cost about 50 of the 80 ns Wrap adds per
// record (BenchmarkPromise); at the tailer's million lines a second one in
// eight still gives quantiles plenty of samples.
const latencySampling = 8

// metrics are the Shipper's Prometheus collectors.
type metrics struct {
	// records and bytes count acknowledged records by topic: one
	// shipper carries an agent's data and its audit counts (and under
	// millrace up the ops metrics), so a total over topics is more than
	// the data topic holds.
	records    *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	byTopic    sync.Map // topic -> *topicCounters, so a record costs no label hashing
	wireBytes  prometheus.Counter
	errors     *prometheus.CounterVec
	ackLatency prometheus.Histogram
	acked      atomic.Uint64 // acknowledged records, for sampling ackLatency
}

func newMetrics(reg prometheus.Registerer, s *Shipper) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_ship_records_sent_total",
			Help: "Records the broker acknowledged, by topic (each record once, however often it was retried).",
		}, []string{"topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_ship_bytes_sent_total",
			Help: "Key, value and header bytes of records the broker acknowledged, by topic.",
		}, []string{"topic"}),
		wireBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_ship_batch_bytes_written_total",
			Help: "Record bytes written to brokers after compression (retries counted again).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_ship_errors_total",
			Help: "Records that failed, by kind (buffer_full, timeout, broker, canceled, closed, too_large, rejected, denied, other).",
		}, []string{"kind"}),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "millrace_ship_ack_latency_seconds",
			Help:    "Time from a record's timestamp (when it was produced, unless the producer set it) to the broker's acknowledgement, observed for one acknowledged record in 8.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}),
	}
	bufRecords := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_ship_buffered_records",
		Help: "Records produced but not yet acknowledged.",
	}, func() float64 { return float64(s.BufferedRecords()) })
	bufBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_ship_buffered_bytes",
		Help: "Buffer room held by records produced but not yet acknowledged: their key, value and headers plus a fixed overhead each (see max_buffered_bytes).",
	}, func() float64 { return float64(s.BufferedBytes()) })
	bufFill := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_ship_buffer_fill_ratio",
		Help: "Buffer use as a fraction of its limit (the larger of the bytes and records ratios).",
	}, s.fill)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.records, m.bytes, m.wireBytes, m.errors, m.ackLatency, bufRecords, bufBytes, bufFill, s.problems} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// batchHook counts compressed bytes as kgo writes them.
type batchHook struct{ m *metrics }

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (h batchHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, bm kgo.ProduceBatchMetrics) {
	h.m.wireBytes.Add(float64(bm.CompressedBytes))
}

// topicCounters are the acknowledged-record counters of one topic.
type topicCounters struct {
	topic          string
	records, bytes prometheus.Counter
}

// forTopic returns topic's counters, made on its first record.
func (m *metrics) forTopic(topic string) *topicCounters {
	if c, ok := m.byTopic.Load(topic); ok {
		return c.(*topicCounters)
	}
	c, _ := m.byTopic.LoadOrStore(topic, &topicCounters{topic: topic,
		records: m.records.WithLabelValues(topic), bytes: m.bytes.WithLabelValues(topic)})
	return c.(*topicCounters)
}
