// Package beacon is millrace's HTTP ingest server for web activity and ops
// metrics (docs/architecture.md §7). It takes click events as a 1x1 pixel GET
// (/b.gif), as JSON POSTs (/v1/events, one event or an array, also as
// text/plain so navigator.sendBeacon needs no CORS preflight), serves a small
// tracker script (/beacon.js), and takes metric samples as Prometheus text or
// JSON (/v1/metrics) and as Prometheus remote write (/api/v1/write,
// remotewrite.go). Every event is validated against its schema, enriched
// (event id, receive time, client IP, user agent, referrer) and produced
// through agents/ship; events that do not fit the schema go to a dead-letter
// topic with the reason.
//
// # Delivery rule
//
// A 2xx answer means the broker acknowledged every record of the request,
// valid events and dead letters alike. When the producer's buffer cannot take
// the request, or the acknowledgements do not arrive within AckTimeout, the
// answer is 503 with Retry-After and the client sends the request again
// (at-least-once: a retried request may duplicate events the broker took
// before the timeout; events carry a client-chosen UUID when the tracker sent
// one, so duplicates can be dropped downstream).
//
// # Status codes
//
//   - 200: at least one event accepted (or nothing to do); the body counts
//     accepted and rejected events and gives each rejection's reason.
//   - 400: the body is not JSON, or every event of the request was rejected
//     (all of them are in the dead-letter topic). Do not retry.
//   - 403: the request's Origin is not in AllowedOrigins.
//   - 408: the body did not arrive within BodyReadTimeout; the connection
//     is closed.
//   - 413: the body exceeds MaxBodyBytes, or it holds more than
//     MaxEventsPerRequest events or samples (413 rather than 400 because,
//     like the body limit, it is about the request's size; the client
//     should split it). /v1/metrics stops reading a Prometheus text body at
//     the first sample line past the limit.
//   - 415: a content type other than JSON or text/plain (or Prometheus text
//     on /v1/metrics).
//   - 429: the client (its IPv4 address, or its IPv6 /64) is over its
//     request rate, or already has MaxConcurrentPerClient requests in
//     progress; Retry-After says when to try again.
//   - 503: the broker cannot take the events now, or MaxConcurrentRequests
//     requests are already being processed; Retry-After says when.
//
// # Slow clients
//
// A request's body is read, under BodyReadTimeout, before the request takes
// one of the MaxConcurrentRequests processing slots, so clients that send
// their bodies slowly hold only their own connection (at most
// MaxConcurrentPerClient of them per client) and never the slots that other
// clients' requests need.
package beacon

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"millrace/internal/httpserver"
	"millrace/schemas/srclient"
)

// Defaults for Config.
const (
	DefaultListen              = ":8090"
	DefaultTopic               = "clicks"
	DefaultMetricsTopic        = "ops.metrics"
	DLQSuffix                  = ".dlq"
	DefaultMaxBodyBytes        = 1 << 20
	DefaultMaxEventsPerRequest = 500
	DefaultRateLimit           = 100
	DefaultRateBurst           = 200
	// DefaultAuditNewSources and DefaultAuditNewSourcesBurst: see
	// Config.AuditNewSources.
	DefaultAuditNewSources      = 1
	DefaultAuditNewSourcesBurst = 100
	DefaultRateLimitClients     = 100_000
	DefaultMaxConcurrent        = 256
	DefaultMaxConcurrentClient  = 16
	DefaultIPv6ClientPrefix     = 64
	DefaultBodyReadTimeout      = 5 * time.Second
	DefaultMaxClockSkew         = 24 * time.Hour
	DefaultAckTimeout           = 10 * time.Second
	DefaultRetryAfter           = time.Second
	DefaultReadHeaderTimeout    = 5 * time.Second
	DefaultReadTimeout          = 30 * time.Second
	DefaultIdleTimeout          = 2 * time.Minute
	DefaultCORSMaxAge           = 10 * time.Minute
)

// Config configures a Server. Zero values mean "the default" (see
// WithDefaults); Validate rejects impossible combinations.
type Config struct {
	// Listen is the HTTP listen address used by Start. Default ":8090".
	Listen string `yaml:"listen"`
	// MetricsListen, when set, moves the beacon's Prometheus /metrics off
	// the ingest listener to a listener of its own at this address (Start
	// opens it), so the public ingest port does not show the beacon's
	// internals. Default "": /metrics is served on Listen.
	MetricsListen string `yaml:"metrics_listen"`
	// TLS serves Listen and MetricsListen over HTTPS from PEM files
	// (tls.cert: the certificate chain, with the key unless tls.key names
	// it). The routes stay public: the beacon takes events from anyone.
	// Default: none, plain HTTP.
	TLS *httpserver.TLSConfig `yaml:"tls"`
	// Topic receives valid click events. Default "clicks".
	Topic string `yaml:"topic"`
	// DLQTopic receives rejected click events in an envelope with the
	// reason. Default Topic + ".dlq".
	DLQTopic string `yaml:"dlq_topic"`
	// MetricsTopic receives the samples posted to /v1/metrics, one record
	// per sample. Default "ops.metrics".
	MetricsTopic string `yaml:"metrics_topic"`
	// MetricsDLQTopic receives rejected samples. Default MetricsTopic + ".dlq".
	MetricsDLQTopic string `yaml:"metrics_dlq_topic"`
	// AllowedOrigins is the CORS allow-list: exact origins
	// ("https://shop.example.com") or "*" for any. Default ["*"]. A POST
	// whose Origin header is not allowed is refused with 403, because
	// text/plain POSTs skip the browser's preflight and the list would
	// otherwise not protect anything.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// TrustedProxies are the IPs or CIDRs of reverse proxies whose
	// X-Forwarded-For header is believed. Default none: the client IP is the
	// socket's peer.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// TruncateIP stores client IPs cut to their /24 (IPv4) or /48 (IPv6)
	// network, so no single visitor's address is kept. Default false. Rate
	// limiting uses the untruncated client (see IPv6ClientPrefix).
	TruncateIP bool `yaml:"truncate_ip"`
	// HonorDoNotTrack makes the tracker send nothing when the browser's Do
	// Not Track setting is on, and the server drop events of requests with
	// the "DNT: 1" header. Default false.
	HonorDoNotTrack bool `yaml:"honor_do_not_track"`
	// MaxBodyBytes caps a request body; above it the answer is 413.
	// Default 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxEventsPerRequest caps the events (or metric samples) of one
	// request; above it the answer is 413 and nothing is produced.
	// Default 500.
	MaxEventsPerRequest int `yaml:"max_events_per_request"`
	// MaxConcurrentRequests bounds the ingest requests processed at once
	// (parsed, produced, waiting for the broker); more are answered 503. A
	// request takes its slot only once its whole body is read, so slow
	// senders cannot hold slots. Default 256.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests"`
	// MaxConcurrentPerClient bounds the ingest requests one client (an
	// IPv4 address, or an IPv6 network of IPv6ClientPrefix bits) has in
	// progress, body reading included; more are answered 429. It bounds
	// what one client holds with slow bodies: this many connections, each
	// for at most BodyReadTimeout, and their bodies (MaxBodyBytes each).
	// Default 16.
	MaxConcurrentPerClient int `yaml:"max_concurrent_per_client"`
	// IPv6ClientPrefix is how many leading bits of an IPv6 address name
	// one client for the rate limit and MaxConcurrentPerClient: a /64 is
	// what one household or host usually gets, so keying by the full /128
	// would let one of them rotate through addresses for unlimited bursts.
	// Default 64; 128 keys by the full address.
	IPv6ClientPrefix int `yaml:"ipv6_client_prefix"`
	// BodyReadTimeout bounds the time to receive a request's body, from
	// the end of its headers; a body not complete by then is answered 408
	// and its connection closed. Default 5s (1 MiB in 5s is 200 KB/s;
	// beacon bodies are usually a few KiB).
	BodyReadTimeout time.Duration `yaml:"body_read_timeout"`
	// MaxClockSkew is how far a click's client-sent ts may be from the
	// time the beacon received it. A ts further away is clamped to
	// received_at ± MaxClockSkew and the client's value is kept in
	// client_ts, so a wrong or hostile clock cannot scatter events over the
	// lake's hour directories. Default 24h.
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
	// RateLimit is the sustained request rate allowed per client IP, in
	// requests per second, on the ingest routes. Default 100; negative
	// turns rate limiting off.
	RateLimit float64 `yaml:"rate_limit"`
	// RateBurst is how many requests a client IP may send at once above
	// the sustained rate. Default 200.
	RateBurst int `yaml:"rate_burst"`
	// RateLimitClients bounds the number of client IPs tracked by the rate
	// limiter (memory stays bounded under a flood of addresses: idle
	// entries are evicted first). Default 100000.
	RateLimitClients int `yaml:"rate_limit_clients"`
	// AuditNewSources is how many new audit sources (page hosts, sample
	// sources) a client IP may open per second in the audit's counts; the
	// events of sources opened faster are counted in the hour's "(other)"
	// count, exactly, so one client cannot fill audit.max_keys and leave
	// legitimate sources uncounted. Default 1; negative turns it off.
	AuditNewSources float64 `yaml:"audit_new_sources"`
	// AuditNewSourcesBurst is how many new sources a client IP may open at
	// once above that rate. Default 100.
	AuditNewSourcesBurst int `yaml:"audit_new_sources_burst"`
	// AckTimeout is how long a request waits for the broker to acknowledge
	// its events before the answer is 503. Default 10s.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// RetryAfter is the Retry-After given with 503 answers (rounded up to
	// whole seconds). Default 1s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// MetricsSource is the "source" of samples posted without one (no
	// "source" query parameter, header X-Millrace-Source or JSON field).
	// Default: the client IP.
	MetricsSource string `yaml:"metrics_source"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// HTTP server's timeouts (see internal/httpserver). Defaults 5s, 30s,
	// ReadTimeout+AckTimeout, 2m.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	// CORSMaxAge is how long browsers may cache a preflight answer.
	// Default 10m.
	CORSMaxAge time.Duration `yaml:"cors_max_age"`
	// Schemas maps an event type (an event's "type" field) to the schema
	// registry subject whose latest JSON Schema its events must match, as
	// the client sent them (before the beacon adds event_id, received_at
	// and the rest), e.g. {click: clicks-value}. An event that does not
	// match is rejected with the validation's reason, like one that does
	// not fit the click schema; types not in the map are not checked.
	// Default: none, no registry is asked.
	Schemas map[string]string `yaml:"schemas"`
	// SchemaRegistry is where the Schemas subjects are (urls, username,
	// password or password_file, tls, timeout; refresh is how often a
	// subject's latest version is asked again, default 1m). While the
	// registry cannot be reached the version already held is used; an
	// event type whose schema was never fetched is answered 503.
	SchemaRegistry srclient.Config `yaml:"schema_registry"`
	// RemoteWrite serves Prometheus remote write 1.0 at POST
	// /api/v1/write into MetricsTopic (see remotewrite.go). On by default;
	// remote_write.enabled: false turns it off.
	RemoteWrite RemoteWriteConfig `yaml:"remote_write"`
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.DLQTopic == "" {
		c.DLQTopic = c.Topic + DLQSuffix
	}
	if c.MetricsTopic == "" {
		c.MetricsTopic = DefaultMetricsTopic
	}
	if c.MetricsDLQTopic == "" {
		c.MetricsDLQTopic = c.MetricsTopic + DLQSuffix
	}
	if c.AllowedOrigins == nil {
		c.AllowedOrigins = []string{"*"}
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxEventsPerRequest == 0 {
		c.MaxEventsPerRequest = DefaultMaxEventsPerRequest
	}
	if c.MaxConcurrentRequests == 0 {
		c.MaxConcurrentRequests = DefaultMaxConcurrent
	}
	if c.RateLimit == 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.RateBurst == 0 {
		c.RateBurst = DefaultRateBurst
	}
	if c.RateLimitClients == 0 {
		c.RateLimitClients = DefaultRateLimitClients
	}
	if c.AuditNewSources == 0 {
		c.AuditNewSources = DefaultAuditNewSources
	}
	if c.AuditNewSourcesBurst == 0 {
		c.AuditNewSourcesBurst = DefaultAuditNewSourcesBurst
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = c.ReadTimeout + c.AckTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.CORSMaxAge == 0 {
		c.CORSMaxAge = DefaultCORSMaxAge
	}
	if c.MaxConcurrentPerClient == 0 {
		c.MaxConcurrentPerClient = DefaultMaxConcurrentClient
	}
	if c.IPv6ClientPrefix == 0 {
		c.IPv6ClientPrefix = DefaultIPv6ClientPrefix
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = DefaultMaxClockSkew
	}
	if len(c.Schemas) > 0 {
		c.SchemaRegistry = c.SchemaRegistry.WithDefaults()
	}
	c.RemoteWrite = c.remoteWriteDefaults()
	return c
}

// Validate reports every impossible setting, each in a sentence that says
// why. It expects defaults to have been applied.
func (c Config) Validate() error {
	var errs []error
	for name, topic := range map[string]string{"topic": c.Topic, "dlq_topic": c.DLQTopic,
		"metrics_topic": c.MetricsTopic, "metrics_dlq_topic": c.MetricsDLQTopic} {
		if strings.TrimSpace(topic) == "" {
			errs = append(errs, fmt.Errorf("beacon: %s: a topic name is needed", name))
		}
	}
	if c.Topic == c.DLQTopic || c.MetricsTopic == c.MetricsDLQTopic {
		errs = append(errs, errors.New("beacon: a dead-letter topic must differ from the topic it serves, or rejected events would mix with valid ones"))
	}
	for _, o := range c.AllowedOrigins {
		if o != "*" && !strings.Contains(o, "://") {
			errs = append(errs, fmt.Errorf("beacon: allowed_origins: %q is neither \"*\" nor scheme://host[:port]", o))
		}
	}
	if _, err := parseTrusted(c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("beacon: max_body_bytes: %d is below 1024, too small for one event", c.MaxBodyBytes))
	}
	if c.MaxEventsPerRequest < 1 {
		errs = append(errs, errors.New("beacon: max_events_per_request: must be at least 1"))
	}
	if c.MaxConcurrentRequests < 1 {
		errs = append(errs, errors.New("beacon: max_concurrent_requests: must be at least 1"))
	}
	if c.RateLimit > 0 && c.RateBurst < 1 {
		errs = append(errs, errors.New("beacon: rate_burst: must be at least 1, or no request could ever pass"))
	}
	if c.RateLimitClients < 1 {
		errs = append(errs, errors.New("beacon: rate_limit_clients: must be at least 1"))
	}
	if c.AckTimeout < 0 || c.RetryAfter < 0 || c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 ||
		c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.CORSMaxAge < 0 || c.BodyReadTimeout < 0 {
		errs = append(errs, errors.New("beacon: timeouts must not be negative"))
	}
	if c.MetricsListen != "" && c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
		errs = append(errs, errors.New("beacon: metrics_listen must differ from listen; leave it empty to serve /metrics on the ingest listener"))
	}
	if c.MaxConcurrentPerClient < 1 {
		errs = append(errs, errors.New("beacon: max_concurrent_per_client: must be at least 1"))
	}
	if c.IPv6ClientPrefix < 32 || c.IPv6ClientPrefix > 128 {
		errs = append(errs, fmt.Errorf("beacon: ipv6_client_prefix: %d is outside 32..128; shorter prefixes would put whole providers in one client", c.IPv6ClientPrefix))
	}
	if c.BodyReadTimeout > c.ReadTimeout {
		errs = append(errs, fmt.Errorf("beacon: body_read_timeout %v must not exceed read_timeout %v, which already bounds the whole request", c.BodyReadTimeout, c.ReadTimeout))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("beacon: %w", err))
	}
	if c.MaxClockSkew <= 0 {
		errs = append(errs, errors.New("beacon: max_clock_skew: must be positive"))
	}
	if len(c.Schemas) > 0 {
		if err := c.SchemaRegistry.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("beacon: %w", err))
		}
		for eventType, subject := range c.Schemas {
			if eventType == "" || strings.TrimSpace(subject) == "" {
				errs = append(errs, fmt.Errorf("beacon: schemas: event type %q maps to subject %q; both must be named", eventType, subject))
			}
		}
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= c.AckTimeout {
		errs = append(errs, fmt.Errorf("beacon: write_timeout %v must exceed ack_timeout %v, or answers would be cut off while waiting for the broker", c.WriteTimeout, c.AckTimeout))
	}
	if err := c.validateRemoteWrite(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// HTTPTimeouts are the server timeouts for the beacon's routes, for
// internal/httpserver.
func (c Config) HTTPTimeouts() httpserver.Timeouts {
	return httpserver.Timeouts{ReadHeader: c.ReadHeaderTimeout, Read: c.ReadTimeout, Write: c.WriteTimeout, Idle: c.IdleTimeout}
}

// parseTrusted turns the trusted proxy list into prefixes; a bare address is
// a /32 or /128.
func parseTrusted(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("beacon: trusted_proxies: %q is not an IP or CIDR: %w", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("beacon: trusted_proxies: %q is not an IP or CIDR: %w", s, err)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
