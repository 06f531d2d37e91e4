package otlp

import "github.com/prometheus/client_golang/prometheus"

// metrics are the receiver's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec // by signal, transport, code
	received *prometheus.CounterVec // items decoded, by signal
	produced *prometheus.CounterVec // items the broker acknowledged, by signal
	refused  *prometheus.CounterVec // items answered as rejected, by signal
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_otlp_requests_total",
			Help: "OTLP export requests answered, by signal, transport (http, grpc) and code (HTTP status or gRPC code name).",
		}, []string{"signal", "transport", "code"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_otlp_items_received_total",
			Help: "Log records, metric data points and spans decoded from OTLP requests, by signal.",
		}, []string{"signal"}),
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_otlp_items_produced_total",
			Help: "Items whose records the broker acknowledged, by signal.",
		}, []string{"signal"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_otlp_items_refused_total",
			Help: "Items answered as rejected in a partial success (too large for a record, or refused by the broker), by signal.",
		}, []string{"signal"}),
	}
	for _, s := range []string{"logs", "metrics", "traces"} {
		m.received.WithLabelValues(s)
		m.produced.WithLabelValues(s)
		m.refused.WithLabelValues(s)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.received, m.produced, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
