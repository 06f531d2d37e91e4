// Package intake turns Prometheus metrics into metric-sample events (the
// metric schema of docs/architecture.md §7): the beacon's POST /v1/metrics uses it for
// pushed expositions, and the ops publisher for every component's own
// metrics, so both write the same series a Prometheus server would store.
package intake

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"millrace/schemas"
)

// Sample is one metric sample before it becomes an event.
type Sample struct {
	Name   string
	Kind   string // counter, gauge, histogram, summary or untyped
	Value  float64
	Labels map[string]string
	TS     time.Time
}

// ParseExposition parses the Prometheus text format and expands every
// family into its samples (see FromFamilies), families in name order.
func ParseExposition(body []byte, now time.Time) ([]Sample, error) {
	return ParseExpositionFrom(bytes.NewReader(body), now)
}

// ParseExpositionFrom is ParseExposition reading from r. The parser reads
// r only as far as it needs, so a reader that ends with an error (one that
// bounds the input, say) stops the parse there, with that error.
func ParseExpositionFrom(r io.Reader, now time.Time) ([]Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	list := make([]*dto.MetricFamily, 0, len(fams))
	for _, mf := range fams {
		list = append(list, mf)
	}
	slices.SortFunc(list, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return FromFamilies(list, now), nil
}

// FromFamilies expands families into samples, in the given order. Counter,
// gauge and untyped samples keep the family's name and kind; a histogram
// becomes <name>_bucket samples with an "le" label (cumulative counts,
// "+Inf" always present), <name>_sum and <name>_count, all of kind
// "histogram"; a summary becomes <name> samples with a "quantile" label,
// <name>_sum and <name>_count, all of kind "summary". A sample's time is its
// own when it has one, else now.
func FromFamilies(fams []*dto.MetricFamily, now time.Time) []Sample {
	var out []Sample
	for _, mf := range fams {
		out = appendFamily(out, mf, now)
	}
	return out
}

func appendFamily(out []Sample, mf *dto.MetricFamily, now time.Time) []Sample {
	name := mf.GetName()
	for _, m := range mf.GetMetric() {
		labels := make(map[string]string, len(m.GetLabel())+1)
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		ts := now
		if m.TimestampMs != nil {
			ts = time.UnixMilli(m.GetTimestampMs()).UTC()
		}
		add := func(name, kind string, v float64, extra ...string) {
			l := labels
			if len(extra) == 2 {
				l = make(map[string]string, len(labels)+1)
				for k, v := range labels {
					l[k] = v
				}
				l[extra[0]] = extra[1]
			}
			out = append(out, Sample{Name: name, Kind: kind, Value: v, Labels: l, TS: ts})
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			add(name, "counter", m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			add(name, "gauge", m.GetGauge().GetValue())
		case dto.MetricType_SUMMARY:
			sum := m.GetSummary()
			for _, q := range sum.GetQuantile() {
				add(name, "summary", q.GetValue(), "quantile", formatBound(q.GetQuantile()))
			}
			add(name+"_sum", "summary", sum.GetSampleSum())
			add(name+"_count", "summary", float64(sum.GetSampleCount()))
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			h := m.GetHistogram()
			sawInf := false
			for _, b := range h.GetBucket() {
				sawInf = sawInf || math.IsInf(b.GetUpperBound(), 1)
				count := float64(b.GetCumulativeCount())
				if b.CumulativeCountFloat != nil {
					count = b.GetCumulativeCountFloat()
				}
				add(name+"_bucket", "histogram", count, "le", formatBound(b.GetUpperBound()))
			}
			count := float64(h.GetSampleCount())
			if h.SampleCountFloat != nil {
				count = h.GetSampleCountFloat()
			}
			if !sawInf {
				// The +Inf bucket is the count (Prometheus exposition rule).
				add(name+"_bucket", "histogram", count, "le", "+Inf")
			}
			add(name+"_sum", "histogram", h.GetSampleSum())
			add(name+"_count", "histogram", count)
		default: // UNTYPED and anything newer
			add(name, "untyped", m.GetUntyped().GetValue())
		}
	}
	return out
}

// formatBound writes an le or quantile label value as Prometheus does.
func formatBound(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Encode fills row (of schemas.Metric) from the sample and returns the
// event's JSON appended to dst. source may be empty.
func (s Sample) Encode(dst []byte, row *schemas.Row, source string) ([]byte, error) {
	row.Reset()
	var src any
	if source != "" {
		src = source
	}
	err := errors.Join(
		row.Set("name", s.Name),
		row.Set("kind", s.Kind),
		row.Set("value", s.Value),
		row.Set("labels", s.Labels),
		row.Set("ts", s.TS),
		row.Set("source", src),
	)
	if err != nil {
		return dst, err
	}
	return row.AppendJSON(dst), nil
}
