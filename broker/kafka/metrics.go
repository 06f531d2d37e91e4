package kafka

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerMetrics are the wire server's Prometheus metrics: requests and their
// latency by API, and records and bytes produced per topic. Fetched record
// bytes are counted where they are written (sendfile or copy).
type brokerMetrics struct {
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	producedRecs  *prometheus.CounterVec
	producedBytes *prometheus.CounterVec
}

func newBrokerMetrics(reg prometheus.Registerer) (*brokerMetrics, error) {
	m := &brokerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_requests_total", Help: "Kafka requests served, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "millrace_broker_request_duration_seconds", Help: "Time to serve a request, by API (long-poll fetches include their wait).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"api"}),
		producedRecs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_produced_records_total", Help: "Records appended by produce requests, by topic.",
		}, []string{"topic"}),
		producedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_produced_bytes_total", Help: "Record-batch bytes appended by produce requests, by topic.",
		}, []string{"topic"}),
	}
	if reg == nil {
		return m, nil
	}
	fetched := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "millrace_broker_fetched_record_bytes_total", Help: "Record bytes sent to consumers and followers.",
	}, func() float64 { return float64(streamedRecordBytes.Load()) })
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.producedRecs, m.producedBytes, fetched} {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return nil, err
		}
	}
	return m, nil
}

// served records one request that arrived at start.
func (m *brokerMetrics) served(key int16, start time.Time) {
	api := kmsg.NameForKey(key)
	m.requests.WithLabelValues(api).Inc()
	m.latency.WithLabelValues(api).Observe(time.Since(start).Seconds())
}

// produced records one successful append.
func (m *brokerMetrics) produced(topic string, records, bytes int) {
	m.producedRecs.WithLabelValues(topic).Add(float64(records))
	m.producedBytes.WithLabelValues(topic).Add(float64(bytes))
}
