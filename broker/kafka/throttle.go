package kafka

// Client quota enforcement: broker/quota decides how long a client is over
// its quotas; this file makes the client wait, as Kafka does.
//
//   - Every request is recorded once handled: Produce its request bytes
//     under producer_byte_rate, Fetch its response's record bytes under
//     consumer_byte_rate (counted when the response is built, as Kafka
//     counts them), and every request handled in line its handling time
//     under request_percentage. A handler that parks without holding the
//     reader (a long-poll Fetch, JoinGroup) is not timed: its wait takes
//     no handler's time, as a request in Kafka's purgatory takes no
//     request handler thread. The largest throttle wins.
//     A throttled Fetch keeps its records: Kafka answers it empty and
//     takes its bytes back off the quota, which a Limiter cannot do, so
//     here the bytes recorded are the bytes sent, and the mute spaces the
//     next fetch.
//   - KIP-219: the response goes out at once carrying throttle_time_ms,
//     and the connection is muted: its reader reads no further request
//     until the throttle ends (conn.awaitUnmuted), while the writer still
//     sends the responses in flight. Clients since KIP-219 also back off on
//     their own side, so a well-behaved client never finds itself muted.
//     Muting costs no goroutine: the connection's own reader waits.
//   - Exempt, as in Kafka, is replication: follower fetches (replica ID
//     >= 0), the inter-broker SASL user, and the inter-broker listener when
//     it is a listener of its own (with one listener, it is the clients'
//     one too and exempts nothing).
//   - controller_mutation_rate (KIP-599, throttle_mutations.go).
//
// With no quotas (Config.Quotas nil or quota.None) the broker holds no
// enforcer and the request path pays one nil check.

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/quota"
)

// fetchKey is Fetch's API key.
const fetchKey = 1

// quotaEnforcer asks the Limiter per request and counts the throttles.
type quotaEnforcer struct {
	limiter quota.Limiter
	// sw, when the limiter has one, says which kinds any entity limits:
	// the others are not measured (nil: every kind is).
	sw quota.Switch
	// exemptListener is the inter-broker listener when it is not also a
	// client listener, else empty; exemptPrincipal the inter-broker SASL
	// principal, empty without one.
	exemptListener  string
	exemptPrincipal string
	// throttled counts throttled requests by quota kind, and
	// throttleSeconds their throttle time: labelled by kind only, since
	// the Limiter does not say which entity's quota it applied, and
	// client IDs are the client's to choose (unbounded). Per entity,
	// bounded, the Manager's own sensors say it (quota_metrics.go).
	throttled       *prometheus.CounterVec
	throttleSeconds *prometheus.CounterVec
}

// newQuotaEnforcer returns the enforcer for cfg.Quotas, nil when there are
// no quotas. listeners counts the broker's listeners and interBroker names
// the inter-broker one.
func newQuotaEnforcer(cfg Config, listeners int, interBroker string, reg prometheus.Registerer) (*quotaEnforcer, error) {
	switch cfg.Quotas.(type) {
	case nil, quota.None, *quota.None:
		return nil, nil
	}
	e := &quotaEnforcer{
		limiter: cfg.Quotas,
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_throttled_requests_total", Help: "Requests whose client was over a quota and was throttled (KIP-219: answered with throttle_time_ms, its connection muted), by the quota kind that set the throttle.",
		}, []string{"kind"}),
		throttleSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_throttle_time_seconds_total", Help: "Throttle time given to clients over a quota, by the quota kind that set it.",
		}, []string{"kind"}),
	}
	e.sw, _ = cfg.Quotas.(quota.Switch)
	if listeners > 1 {
		e.exemptListener = interBroker
	}
	if cfg.SASL.InterBrokerUsername != "" {
		e.exemptPrincipal = "User:" + cfg.SASL.InterBrokerUsername
	}
	if reg != nil {
		collectors := []prometheus.Collector{e.throttled, e.throttleSeconds}
		if source, ok := cfg.Quotas.(usageReader); ok {
			collectors = append(collectors, newQuotaCollector(source))
		}
		for _, c := range collectors {
			if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				return nil, err
			}
		}
	}
	return e, nil
}

// exempt reports whether r is replication traffic, outside client quotas.
func (e *quotaEnforcer) exempt(r *request) bool {
	c := r.conn
	if c == nil {
		return true // the broker's own, not a client's
	}
	if (e.exemptListener != "" && c.listener == e.exemptListener) || (e.exemptPrincipal != "" && c.principal == e.exemptPrincipal) {
		return true
	}
	if f, ok := r.body.(*kmsg.FetchRequest); ok && isFollowerFetch(f) {
		return true
	}
	return false
}

// quotaUser is the user entity of a principal: its name without the
// "User:" type, as Kafka's quotas name users (ANONYMOUS unauthenticated).
func quotaUser(principal string) string {
	name, _ := strings.CutPrefix(principal, "User:")
	return name
}

// on reports whether any entity may have a quota of kind.
func (e *quotaEnforcer) on(kind quota.Kind) bool { return e.sw == nil || e.sw.Enabled(kind) }

// timed reports whether requests' handling time is to be measured for
// request_percentage; false for a nil enforcer.
func (e *quotaEnforcer) timed() bool { return e != nil && e.on(quota.RequestPercentage) }

// enforce records the handled request r, answered by resp (nil or
// noResponse for none), against its client's quotas; started is when its
// handling began, zero when it was not timed. The throttle, the largest of
// what each quota and the handler (a mutation quota) asked, goes into
// resp's throttle_time_ms and mutes the connection for as long. A kind no
// entity limits is not measured, so with no quotas set a request costs a
// few atomic loads here.
func (e *quotaEnforcer) enforce(r *request, resp kmsg.Response, started time.Time) {
	byteKind := quota.Kind("")
	switch r.key {
	case produceKey:
		byteKind = quota.ProducerByteRate
	case fetchKey:
		byteKind = quota.ConsumerByteRate
	}
	var handlerThrottle time.Duration
	tr, hasThrottle := resp.(kmsg.ThrottleResponse)
	if hasThrottle {
		// A mutation quota's throttle, set by the handler (KIP-599).
		ms, _ := tr.Throttle()
		handlerThrottle = time.Duration(ms) * time.Millisecond
	}
	bytesOn := byteKind != "" && e.on(byteKind)
	if (!bytesOn && started.IsZero() && handlerThrottle <= 0) || e.exempt(r) {
		return
	}
	user, clientID := quotaUser(r.conn.principal), r.clientIDString()
	now := time.Now()
	throttle, kind := time.Duration(0), quota.Kind("")
	take := func(k quota.Kind, d time.Duration) {
		if d > throttle {
			throttle, kind = d, k
		}
	}
	switch {
	case bytesOn && r.key == produceKey:
		take(byteKind, e.limiter.Record(byteKind, user, clientID, float64(r.size), now))
	case bytesOn:
		if f, ok := resp.(*streamedFetch); ok {
			take(byteKind, e.limiter.Record(byteKind, user, clientID, float64(f.recordBytes()), now))
		}
	}
	if !started.IsZero() && !registry[r.key].blocking {
		take(quota.RequestPercentage, e.limiter.Record(quota.RequestPercentage, user, clientID, float64(now.Sub(started).Nanoseconds()), now))
	}
	take(quota.ControllerMutationRate, handlerThrottle)
	if throttle <= 0 {
		return
	}
	if hasThrottle {
		if st, ok := resp.(kmsg.SetThrottleResponse); ok {
			st.SetThrottle(throttleMillis(throttle))
		}
	}
	r.conn.mute(now.Add(throttle))
	e.throttled.WithLabelValues(string(kind)).Inc()
	e.throttleSeconds.WithLabelValues(string(kind)).Add(throttle.Seconds())
}

// throttleMillis is d in whole milliseconds, rounded up so that a throttle
// is never answered as 0, and bounded to the field.
func throttleMillis(d time.Duration) int32 {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return int32(min(ms, 1<<31-1))
}

// recordBytes is the record bytes the response carries, what a consumer
// byte rate counts (the rest of a Fetch response is a few bytes per
// partition).
func (f *streamedFetch) recordBytes() int64 {
	var n int64
	for _, rec := range f.records {
		n += int64(rec.slice.Len())
	}
	for _, t := range f.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.RecordBatches))
		}
	}
	return n
}

// muteDeadline is when a connection's mute ends (KIP-219), in Unix
// nanoseconds; 0 or past when it is not muted. Written by handlers, read by
// the connection's reader.
type muteDeadline struct{ until atomic.Int64 }

// mute keeps the connection's reader from reading a request before until;
// a later mute already set stands.
func (c *conn) mute(until time.Time) {
	u := until.UnixNano()
	for {
		cur := c.muted.until.Load()
		if cur >= u || c.muted.until.CompareAndSwap(cur, u) {
			return
		}
	}
}

// awaitUnmuted returns once the connection is not muted, or the
// connection's context error if it closes first. Responses in flight are
// written meanwhile: only reading waits.
func (c *conn) awaitUnmuted() error {
	var timer *time.Timer
	for {
		until := c.muted.until.Load()
		if until == 0 {
			return nil
		}
		wait := time.Until(time.Unix(0, until))
		if wait <= 0 {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
}
