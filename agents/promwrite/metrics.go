package promwrite

import "github.com/prometheus/client_golang/prometheus"

// metrics are the handler's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec // by status code
	received prometheus.Counter     // float samples, stale markers included
	produced prometheus.Counter     // samples the broker acknowledged
	dropped  *prometheus.CounterVec // by reason
}

// dropReasons are the values of the dropped counter's reason label.
var dropReasons = []string{"stale", "native_histogram", "exemplar", "invalid"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_promwrite_requests_total",
			Help: "Remote write requests answered, by HTTP status code.",
		}, []string{"code"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_promwrite_samples_received_total",
			Help: "Float samples received in decoded remote write requests, stale markers included.",
		}),
		produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_promwrite_samples_produced_total",
			Help: "Samples the broker acknowledged as metric-sample events.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_promwrite_samples_dropped_total",
			Help: "Samples not produced, by reason: stale (stale markers), native_histogram and exemplar (not kept), invalid (refused by the metric schema).",
		}, []string{"reason"}),
	}
	for _, r := range dropReasons {
		m.dropped.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.received, m.produced, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
