package beacon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"millrace/agents/promwrite"
	"millrace/agents/ship"
	"millrace/audit"
	"millrace/internal/httpserver"
)

// Producer is what the beacon produces through; *ship.Shipper implements it.
// TryProduce must not wait for buffer room (the beacon answers 503 instead),
// and the buffer figures let a request be refused whole rather than half
// produced. ReadyFor tells /readyz whether the broker answers and records
// to the beacon's topics ship (not held up by a missing topic, a denied
// write); it must answer from what the producer already knows, since anyone
// can call /readyz at any rate.
type Producer interface {
	ship.Publisher
	ReadyFor(ctx context.Context, topics ...string) error
}

// Server is the beacon's HTTP server. Build it with New; serve Handler()
// yourself or call Start and Shutdown. The Producer's lifetime is the
// caller's: start it before the first request and shut it down after
// Shutdown, so every answered request has its records flushed.
type Server struct {
	cfg      Config
	producer Producer
	logger   *slog.Logger
	metrics  *metrics
	gatherer prometheus.Gatherer
	ips      ipResolver
	limiter  *rateLimiter // nil when rate limiting is off
	// newSources limits the audit sources a client opens (nil: off).
	newSources *rateLimiter
	clients    *clientSlots  // each client's ingest requests in progress
	inFlight   chan struct{} // a slot per ingest request being processed
	anyOrig    bool
	origins    map[string]bool
	script     []byte
	etag       string
	now        func() time.Time
	handler    http.Handler
	draining   atomic.Bool
	// clickAudit and metricAudit count acknowledged events (audit.go); set
	// by SetAudit before Start, nil counts nothing.
	clickAudit, metricAudit *audit.Counter
	// eventSchemas validates events against the registry's JSON Schemas
	// (Config.Schemas); nil checks nothing.
	eventSchemas *eventSchemas
	// remoteWrite serves POST /api/v1/write (remotewrite.go); nil when
	// remote_write.enabled is false.
	remoteWrite *promwrite.Handler

	mu         sync.Mutex // guards the following
	ingest     *listening // nil before Start
	metricsSrv *listening // nil unless Start opened MetricsListen
}

// New checks cfg (after defaults), registers the beacon's metrics with reg
// (nil registers none) and builds the handler. /metrics serves reg when it
// is also a prometheus.Gatherer (a *prometheus.Registry is), else the
// default gatherer. It starts nothing.
func New(cfg Config, producer Producer, reg prometheus.Registerer, logger *slog.Logger) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if producer == nil {
		return nil, errors.New("beacon: a producer is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	trusted, _ := parseTrusted(cfg.TrustedProxies) // validated above
	s := &Server{
		cfg:      cfg,
		producer: producer,
		logger:   logger.With("component", "beacon", "topic", cfg.Topic),
		ips:      ipResolver{trusted: trusted, truncate: cfg.TruncateIP},
		origins:  make(map[string]bool),
		now:      time.Now,
		gatherer: prometheus.DefaultGatherer,
		clients:  newClientSlots(cfg.MaxConcurrentPerClient),
		inFlight: make(chan struct{}, cfg.MaxConcurrentRequests),
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		s.gatherer = g
	}
	for _, o := range cfg.AllowedOrigins {
		if o == "*" {
			s.anyOrig = true
		}
		s.origins[o] = true
	}
	if cfg.RateLimit > 0 {
		s.limiter = newRateLimiter(cfg.RateLimit, cfg.RateBurst, cfg.RateLimitClients, func() time.Time { return s.now() })
	}
	if cfg.AuditNewSources > 0 {
		s.newSources = newRateLimiter(cfg.AuditNewSources, cfg.AuditNewSourcesBurst, cfg.RateLimitClients, func() time.Time { return s.now() })
	}
	schemas, err := newEventSchemas(cfg)
	if err != nil {
		return nil, err
	}
	s.eventSchemas = schemas
	m, err := newMetrics(reg, s)
	if err != nil {
		return nil, fmt.Errorf("beacon: registering metrics: %w", err)
	}
	s.metrics = m
	if err := s.newRemoteWrite(reg); err != nil {
		return nil, err
	}
	s.script, s.etag = buildScript(cfg)
	s.handler = s.routes()
	return s, nil
}

// Config returns the configuration in use, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Handler returns the beacon's HTTP handler (all routes).
func (s *Server) Handler() http.Handler { return s.handler }

// The routes, also the "route" label of the metrics.
const (
	routePixel   = "/b.gif"
	routeEvents  = "/v1/events"
	routeMetrics = "/v1/metrics"
	routeScript  = "/beacon.js"
	routeHealth  = "/healthz"
	routeReady   = "/readyz"
	routeProm    = "/metrics"
	// routeRemoteWrite is Prometheus remote write (remotewrite.go).
	routeRemoteWrite = promwrite.Path
	routeOther       = "other"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// CORS comes first so that a browser can read even a 429 or 503.
	mux.HandleFunc("GET "+routePixel, s.limited(s.handlePixel))
	mux.HandleFunc("POST "+routeEvents, s.withCORS(s.requireJSON(s.limited(s.handleEvents))))
	mux.HandleFunc("OPTIONS "+routeEvents, s.preflight)
	mux.HandleFunc("POST "+routeMetrics, s.withCORS(s.limited(s.handleMetrics)))
	mux.HandleFunc("OPTIONS "+routeMetrics, s.preflight)
	mux.HandleFunc("GET "+routeScript, s.handleScript)
	mux.HandleFunc("GET "+routeHealth, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n")) // a failed write is the client's loss only
	})
	mux.HandleFunc("GET "+routeReady, s.handleReady)
	s.remoteWriteRoutes(mux)
	if s.cfg.MetricsListen == "" {
		mux.Handle("GET "+routeProm, s.MetricsHandler())
	}
	return s.instrument(mux)
}

// instrument counts requests by route and status and times them. The route
// label is one of the fixed routes, never the raw path, so scanners probing
// random URLs cannot grow the metric's cardinality.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := routeOther
		switch r.URL.Path {
		case routePixel, routeEvents, routeMetrics, routeScript, routeHealth, routeReady, routeProm, routeRemoteWrite:
			route = r.URL.Path
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		s.metrics.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusRecorder remembers the status code written.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ingestHandler serves an ingest route with the request's body already read.
type ingestHandler func(w http.ResponseWriter, r *http.Request, body []byte)

// limited admits an ingest request, cheapest refusal first: the client
// (see clientKey) must be within its request rate and have fewer than
// MaxConcurrentPerClient requests in progress (429 otherwise); then the
// body is read under BodyReadTimeout; only then does the request take one
// of the MaxConcurrentRequests processing slots (503 when none is free).
// Reading before taking a slot is what keeps slow senders from holding the
// slots that every other client needs.
func (s *Server) limited(next ingestHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := clientKey(s.ips.clientAddr(r), s.cfg.IPv6ClientPrefix)
		if key.IsValid() {
			if s.limiter != nil {
				if ok, wait := s.limiter.allow(key); !ok {
					s.metrics.rateLimited.Inc()
					w.Header().Set("Retry-After", retryAfterSeconds(wait))
					s.fail(w, r, http.StatusTooManyRequests, "rate limit exceeded for this client address")
					return
				}
			}
			if !s.clients.acquire(key) {
				s.metrics.clientBusy.Inc()
				w.Header().Set("Retry-After", retryAfterSeconds(s.cfg.RetryAfter))
				s.fail(w, r, http.StatusTooManyRequests, "too many requests in progress from this client address")
				return
			}
			defer s.clients.release(key)
		}
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		select {
		case s.inFlight <- struct{}{}:
			defer func() { <-s.inFlight }()
		default:
			w.Header().Set("Retry-After", retryAfterSeconds(s.cfg.RetryAfter))
			s.metrics.unavailable.Inc()
			s.fail(w, r, http.StatusServiceUnavailable, "too many requests in progress")
			return
		}
		next(w, r, body)
	}
}

// retryAfterSeconds renders d as a Retry-After value: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(secs, 1), 10)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "not ready: %v\n", err) // a failed write is the prober's loss only
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// ready reports why the beacon cannot take events now, or nil.
func (s *Server) ready(ctx context.Context) error {
	if s.draining.Load() {
		return errors.New("shutting down")
	}
	pc := s.producer.Config()
	if s.producer.BufferedRecords() >= int64(pc.MaxBufferedRecords) ||
		s.producer.BufferedBytes() >= int64(pc.MaxBufferedBytes) {
		return errors.New("producer buffer is full: the broker is not keeping up")
	}
	// Only before the producer's first contact with a broker does ReadyFor
	// wait, for that contact.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	topics := []string{s.cfg.Topic, s.cfg.DLQTopic, s.cfg.MetricsTopic, s.cfg.MetricsDLQTopic}
	if s.remoteWrite != nil && s.cfg.RemoteWrite.Topic != s.cfg.MetricsTopic {
		topics = append(topics, s.cfg.RemoteWrite.Topic)
	}
	return s.producer.ReadyFor(ctx, topics...)
}

// listening is one HTTP server Start runs.
type listening struct {
	http     *http.Server
	listener net.Listener
	done     chan struct{} // closed when Serve returned
}

// serve listens on addr and serves h in a goroutine that shutdown joins.
func (s *Server) serve(addr string, h http.Handler, t httpserver.Timeouts, what string) (*listening, error) {
	tlsConfig, err := s.cfg.TLS.Load()
	if err != nil {
		return nil, fmt.Errorf("beacon: %w", err)
	}
	l, err := httpserver.Listen(addr, tlsConfig)
	if err != nil {
		return nil, fmt.Errorf("beacon: listen (%s): %w", what, err)
	}
	ls := &listening{http: httpserver.New(h, t, s.logger), listener: l, done: make(chan struct{})}
	go func() {
		defer close(ls.done)
		if err := ls.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http server stopped", "server", what, "err", err)
		}
	}()
	s.logger.Info("beacon listening", "server", what, "addr", l.Addr().String(), "scheme", httpserver.Scheme(tlsConfig))
	return ls, nil
}

// shutdown stops ls gracefully until ctx ends, then closes it.
func (ls *listening) shutdown(ctx context.Context) error {
	if ls == nil {
		return nil
	}
	err := ls.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, ls.http.Close())
	}
	<-ls.done
	return err
}

func (ls *listening) addr() net.Addr {
	if ls == nil {
		return nil
	}
	return ls.listener.Addr()
}

// Start listens on Config.Listen, and on Config.MetricsListen when set, and
// serves in goroutines that Shutdown joins.
func (s *Server) Start(_ context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ingest != nil {
		return errors.New("beacon: already started")
	}
	ingest, err := s.serve(s.cfg.Listen, s.handler, s.cfg.HTTPTimeouts(), "ingest")
	if err != nil {
		return err
	}
	if s.cfg.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET "+routeProm, s.MetricsHandler())
		// A scrape needs none of the ingest routes' long write timeout.
		metrics, err := s.serve(s.cfg.MetricsListen, mux, httpserver.Timeouts{}, "metrics")
		if err != nil {
			return errors.Join(err, ingest.shutdown(context.Background()))
		}
		s.metricsSrv = metrics
	}
	s.ingest = ingest
	return nil
}

// MetricsHandler serves the Prometheus metrics (what /metrics serves).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{})
}

// Addr is the address Start listens on (useful with port 0), or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ingest.addr()
}

// Scheme is "https" when the listeners serve TLS (Config.TLS), else "http".
func (s *Server) Scheme() string {
	if s.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// MetricsAddr is the address of the /metrics listener Start opened for
// MetricsListen, or nil.
func (s *Server) MetricsAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metricsSrv.addr()
}

// Shutdown marks the server not ready, stops accepting connections and waits
// for requests in flight (each waits at most AckTimeout for the broker) until
// ctx ends; then it closes the remaining connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	ingest, metrics := s.ingest, s.metricsSrv
	s.mu.Unlock()
	return errors.Join(ingest.shutdown(ctx), metrics.shutdown(ctx))
}
