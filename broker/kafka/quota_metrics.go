package kafka

// Per-entity quota metrics: Kafka exposes, per quota entity, the rate it
// measured (byte-rate, request-time) and the throttle-time it gave. Here
// they are three gauges labelled user, client_id and kind, read from the
// quota manager's sensors at each scrape (quota.Manager.Usage).
//
// Client IDs are the client's to choose, so the series are bounded twice:
// only entities with a quota that were recorded within quotaMetricsRecent
// are listed, and of those only the quotaMetricsSeries (entity, kind)
// pairs with the most throttle, then the highest share of their quota,
// get series of their own; the rest are summed per kind under
// user="<other>", client_id="<other>". Names are the quota paths' (URL
// encoded, as Sanitize writes them), which never contain '<' or '>': the
// "<other>" and "<default>" labels cannot be a client's.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/broker/quota"
)

// Bounds of the per-entity quota metrics.
const (
	// quotaMetricsRecent is how long an entity stays listed after its
	// last request: a scrape every minute or two still sees every entity.
	quotaMetricsRecent = 2 * time.Minute
	// quotaMetricsSeries is the most (entity, kind) pairs with series of
	// their own; with one "<other>" pair per kind, each gauge has at most
	// quotaMetricsSeries+4 series.
	quotaMetricsSeries = 40
	// otherEntity labels the sum of the pairs past quotaMetricsSeries.
	otherEntity = "<other>"
)

// usageReader is a Limiter that can report per-entity usage
// (quota.Manager).
type usageReader interface {
	Usage(now time.Time, within time.Duration) []quota.Usage
}

// quotaCollector exports usageReader's sensors as bounded gauges.
type quotaCollector struct {
	source    usageReader
	maxSeries int
	recent    time.Duration
	now       func() time.Time

	usage, limit, throttle *prometheus.Desc
}

// newQuotaCollector returns the collector of source's usage with the
// default bounds.
func newQuotaCollector(source usageReader) *quotaCollector {
	labels := []string{"user", "client_id", "kind"}
	bounds := fmt.Sprintf(" Only entities with a quota that made a request in the last %v are listed; past the %d (entity, kind) pairs with the most throttle time, then the highest share of their quota, the rest are summed per kind under user and client_id %q. Names are URL-encoded as in the quota paths; an empty label is a component the entity lacks.",
		quotaMetricsRecent, quotaMetricsSeries, otherEntity)
	return &quotaCollector{
		source: source, maxSeries: quotaMetricsSeries, recent: quotaMetricsRecent, now: time.Now,
		usage: prometheus.NewDesc("millrace_broker_quota_usage",
			"What a client quota entity used, measured over the quota windows (11 s) in the quota's unit: bytes per second for producer_byte_rate and consumer_byte_rate, percent of a request handler for request_percentage, partition mutations per second the token bucket lacks of full for controller_mutation_rate."+bounds, labels, nil),
		limit: prometheus.NewDesc("millrace_broker_quota_limit",
			"The quota that applies to a client quota entity, in the unit of millrace_broker_quota_usage (for <other>, the sum of the entities' quotas)."+bounds, labels, nil),
		throttle: prometheus.NewDesc("millrace_broker_quota_throttle_ratio",
			"Throttle time a quota gave a client quota entity's requests (KIP-219), in seconds per second over the quota windows (11 s): 0.5 means its connections were told to wait half the time."+bounds, labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.usage
	ch <- c.limit
	ch <- c.throttle
}

// Collect implements prometheus.Collector.
func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.bounded(c.source.Usage(c.now(), c.recent)) {
		user, client := u.Entity.User, u.Entity.ClientID
		ch <- prometheus.MustNewConstMetric(c.usage, prometheus.GaugeValue, u.Rate, user, client, string(u.Kind))
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, u.Quota, user, client, string(u.Kind))
		ch <- prometheus.MustNewConstMetric(c.throttle, prometheus.GaugeValue, u.Throttle, user, client, string(u.Kind))
	}
}

// bounded keeps the maxSeries pairs with the most throttle, then the
// highest share of their quota (ties by entity, so scrapes agree), and
// sums the rest per kind under otherEntity.
func (c *quotaCollector) bounded(all []quota.Usage) []quota.Usage {
	share := func(u quota.Usage) float64 {
		if u.Quota <= 0 {
			return u.Rate // a quota of 0: any use is over it
		}
		return u.Rate / u.Quota
	}
	slices.SortFunc(all, func(a, b quota.Usage) int {
		return cmp.Or(cmp.Compare(b.Throttle, a.Throttle), cmp.Compare(share(b), share(a)),
			cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Entity.User, b.Entity.User), cmp.Compare(a.Entity.ClientID, b.Entity.ClientID))
	})
	if len(all) <= c.maxSeries {
		return all
	}
	out := all[:c.maxSeries:c.maxSeries]
	others := map[quota.Kind]*quota.Usage{}
	for _, u := range all[c.maxSeries:] {
		o := others[u.Kind]
		if o == nil {
			o = &quota.Usage{Kind: u.Kind, Entity: quota.UserClientEntity(otherEntity, otherEntity)}
			others[u.Kind] = o
		}
		o.Rate += u.Rate
		o.Quota += u.Quota
		o.Throttle += u.Throttle
	}
	for _, k := range quota.Kinds {
		if o := others[k]; o != nil {
			out = append(out, *o)
		}
	}
	return out
}
