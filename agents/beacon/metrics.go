package beacon

import "github.com/prometheus/client_golang/prometheus"

// metrics are the beacon's Prometheus collectors.
type metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	events      *prometheus.CounterVec
	rateLimited prometheus.Counter
	corsDenied  prometheus.Counter
	unavailable prometheus.Counter
	clientBusy  prometheus.Counter
	madeIDs     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_beacon_requests_total",
			Help: "HTTP requests by route (/b.gif, /v1/events, /v1/metrics, /beacon.js, /healthz, /readyz, /metrics, other) and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "millrace_beacon_request_duration_seconds",
			Help:    "Time to answer a request, including the wait for the broker's acknowledgements.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"route"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_beacon_events_total",
			Help: "Events acknowledged by the broker, by stream (click, metric) and result: accepted (in the topic), rejected (in the dead-letter topic), dropped (Do Not Track).",
		}, []string{"stream", "result"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_beacon_rate_limited_total",
			Help: "Requests refused with 429 because their client IP was over its rate.",
		}),
		corsDenied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_beacon_cors_denied_total",
			Help: "Requests and preflights refused because their Origin is not allowed.",
		}),
		unavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_beacon_unavailable_total",
			Help: "Requests answered 503: the broker could not take or acknowledge their events, or every processing slot (max_concurrent_requests) was taken.",
		}),
		clientBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_beacon_client_busy_total",
			Help: "Requests refused with 429 because their client already had max_concurrent_per_client requests in progress.",
		}),
		madeIDs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_beacon_event_ids_made_total",
			Help: "Accepted click events whose event_id the beacon made because the client sent none or no UUID; a retry of such an event cannot be told from a new one.",
		}),
	}
	clients := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_beacon_rate_limiter_clients",
		Help: "Client IPs currently tracked by the rate limiter.",
	}, func() float64 {
		if s.limiter == nil {
			return 0
		}
		return float64(s.limiter.size())
	})
	inProgress := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_beacon_requests_in_progress",
		Help: "Ingest requests admitted and not yet answered, those still receiving their body included.",
	}, func() float64 { return float64(s.clients.total()) })
	processing := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_beacon_requests_processing",
		Help: "Ingest requests holding one of the max_concurrent_requests processing slots (body received).",
	}, func() float64 { return float64(len(s.inFlight)) })
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.events, m.rateLimited, m.corsDenied, m.unavailable, m.clientBusy, m.madeIDs, clients, inProgress, processing} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
