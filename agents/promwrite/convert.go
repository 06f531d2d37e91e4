package promwrite

import (
	"math"
	"strings"
	"sync"
	"time"

	"millrace/agents/intake"
)

// staleNaN is the value Prometheus writes as a stale marker, a NaN with its
// own bit pattern (prometheus/model/value.StaleNaN); other NaNs are values.
const staleNaN uint64 = 0x7ff0000000000002

// IsStale reports whether v is a stale marker.
func IsStale(v float64) bool { return math.Float64bits(v) == staleNaN }

// kindOf maps a metadata type to the metric schema's kind, as agents/intake
// does for a text exposition's TYPE: a gauge histogram is a histogram, and
// types the schema has no kind for (info, stateset, unknown) are untyped.
func kindOf(t MetricType) string {
	switch t {
	case TypeCounter:
		return "counter"
	case TypeGauge:
		return "gauge"
	case TypeHistogram, TypeGaugeHistogram:
		return "histogram"
	case TypeSummary:
		return "summary"
	}
	return "untyped"
}

// familySuffixes lists, per kind, the suffixes a family's series names may
// add to the family name (Prometheus and OpenMetrics exposition rules: a
// histogram family "x" has x_bucket, x_sum, x_count, a counter family may
// be named without the _total its samples carry).
var familySuffixes = map[string][]string{
	"histogram": {"_bucket", "_sum", "_count", "_created"},
	"summary":   {"_sum", "_count", "_created"},
	"counter":   {"_total", "_created"},
}

// Kinds remembers the metadata senders sent: Prometheus sends it in
// requests of its own, apart from the samples (remote_write's
// metadata_config, once a minute by default), so the kind of a sample comes
// from what earlier requests said. Without metadata a sample is untyped:
// agents/intake does not guess a kind from a name either.
type Kinds struct {
	max int
	mu  sync.RWMutex // guards the following
	by  map[string]string
}

// NewKinds returns a Kinds holding at most max families; once full, it
// still updates the families it holds but learns no new one.
func NewKinds(max int) *Kinds { return &Kinds{max: max, by: make(map[string]string)} }

// Learn records the kinds in md.
func (k *Kinds) Learn(md []Metadata) {
	if len(md) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range md {
		if _, ok := k.by[m.Family]; ok || len(k.by) < k.max {
			k.by[m.Family] = kindOf(m.Type)
		}
	}
}

// Of returns the kind of the series named name.
func (k *Kinds) Of(name string) string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if kind, ok := k.by[name]; ok {
		return kind
	}
	for kind, suffixes := range familySuffixes {
		for _, s := range suffixes {
			if base, ok := strings.CutSuffix(name, s); ok && k.by[base] == kind {
				return kind
			}
		}
	}
	return "untyped"
}

// Converted is what a request's samples became.
type Converted struct {
	Samples []intake.Sample
	Stale   int // stale markers dropped
}

// Convert turns the request's float samples into intake samples: Name from
// __name__, Labels the other labels (one map shared by a series' samples),
// TS from the sample's milliseconds, Kind from kinds. Stale markers are
// dropped and counted.
func Convert(req *WriteRequest, kinds *Kinds) Converted {
	n := 0
	for _, ts := range req.Series {
		n += len(ts.Samples)
	}
	out := Converted{Samples: make([]intake.Sample, 0, n)}
	for _, ts := range req.Series {
		var name string
		labels := make(map[string]string, len(ts.Labels))
		for _, l := range ts.Labels {
			if l.Name == "__name__" {
				name = l.Value
				continue
			}
			labels[l.Name] = l.Value
		}
		kind := kinds.Of(name)
		for _, s := range ts.Samples {
			if IsStale(s.Value) {
				out.Stale++
				continue
			}
			out.Samples = append(out.Samples, intake.Sample{
				Name: name, Kind: kind, Value: s.Value, Labels: labels,
				TS: time.UnixMilli(s.TimestampMs).UTC(),
			})
		}
	}
	return out
}
