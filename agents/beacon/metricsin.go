package beacon

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
)

// POST /v1/metrics takes samples in either of two forms, told apart by the
// body's first character (an exposition never starts with '{' or '['):
//
//   - JSON: one metric-sample object or an array of them, in the event
//     format of DESIGN.md §7 ({"name","kind","value","labels","ts","source"});
//     a sample without ts gets the receive time, one without source gets
//     the request's source (below).
//   - Prometheus text exposition format (what /metrics pages serve). Each
//     sample line becomes one event named as the line names it:
//     counter, gauge and untyped samples keep the family's name and kind;
//     a histogram becomes <name>_bucket samples with an "le" label (one per
//     bucket, cumulative counts, "+Inf" always present), <name>_sum and
//     <name>_count, all of kind "histogram"; a summary becomes <name>
//     samples with a "quantile" label, <name>_sum and <name>_count, all of
//     kind "summary". This is the same series a Prometheus server would
//     store when scraping the page. A sample's timestamp is its own when
//     the line has one, else the receive time.
//
// The request's source is the "source" query parameter, else the
// X-Millrace-Source header, else Config.MetricsSource, else the client IP.

// metricSample is one sample before it becomes an event.
type metricSample struct {
	name   string
	kind   string
	value  float64
	labels map[string]string
	ts     time.Time
}

// handleMetrics is POST /v1/metrics.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	info := s.info(r)
	source := r.URL.Query().Get("source")
	if source == "" {
		source = r.Header.Get("X-Millrace-Source")
	}
	if source == "" {
		source = s.cfg.MetricsSource
	}
	if source == "" {
		source = info.ip
	}
	var res *result
	var recs []*kgo.Record
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		raws, err := splitEvents(trimmed, s.cfg.MaxEventsPerRequest)
		if err != nil {
			s.splitFailure(w, r, err)
			return
		}
		res, recs = s.jsonSampleRecords(info, source, raws)
	} else {
		// The format needs its final newline; the trimmed copy lost it.
		samples, err := parseExposition(append(trimmed, '\n'), info.receivedAt)
		if err != nil {
			s.fail(w, r, http.StatusBadRequest, "prometheus text format: "+err.Error())
			return
		}
		if len(samples) > s.cfg.MaxEventsPerRequest {
			s.fail(w, r, http.StatusRequestEntityTooLarge,
				"more than "+strconv.Itoa(s.cfg.MaxEventsPerRequest)+" samples in one request")
			return
		}
		res, recs = s.sampleRecords(info, source, samples)
	}
	if err := s.publish(r.Context(), recs); err != nil {
		s.failPublish(w, r, err)
		return
	}
	s.countResult("metric", res)
	writeJSON(w, res.status(), res)
}

// jsonSampleRecords validates JSON samples against the metric schema,
// filling ts and source when absent.
func (s *Server) jsonSampleRecords(info reqInfo, source string, raws []json.RawMessage) (*result, []*kgo.Record) {
	res := &result{}
	recs := make([]*kgo.Record, 0, len(raws))
	row := schemas.Metric.NewRow()
	for i, raw := range raws {
		err := row.Decode(withDefaults(raw, info.receivedAt, source))
		if err != nil {
			res.Rejected++
			res.Errors = append(res.Errors, rejection{Index: i, Reason: err.Error()})
			recs = append(recs, s.deadLetter(s.cfg.MetricsDLQTopic, "metric", info, raw, err))
			continue
		}
		res.Accepted++
		name, _ := row.Get("name").(string)
		recs = append(recs, &kgo.Record{Topic: s.cfg.MetricsTopic, Key: []byte(name), Value: row.AppendJSON(nil)})
	}
	return res, recs
}

// withDefaults puts "ts" and "source" members first in a JSON object, so the
// object's own members, read later, override them (the schema decoder keeps
// the last value of a repeated member). Non-objects are returned unchanged
// for the decoder to reject.
func withDefaults(raw []byte, ts time.Time, source string) []byte {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return raw
	}
	out := make([]byte, 0, len(raw)+64)
	out = append(out, `{"ts":"`...)
	out = ts.AppendFormat(out, time.RFC3339Nano)
	out = append(out, '"')
	if source != "" {
		out = append(out, `,"source":`...)
		out = appendJSONString(out, source)
	}
	rest := bytes.TrimSpace(trimmed[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// sampleRecords turns parsed exposition samples into metric events.
func (s *Server) sampleRecords(info reqInfo, source string, samples []metricSample) (*result, []*kgo.Record) {
	res := &result{}
	recs := make([]*kgo.Record, 0, len(samples))
	row := schemas.Metric.NewRow()
	for i, m := range samples {
		row.Reset()
		err := errors.Join(
			row.Set("name", m.name),
			row.Set("kind", m.kind),
			row.Set("value", m.value),
			row.Set("labels", m.labels),
			row.Set("ts", m.ts),
			row.Set("source", nilIfEmpty(source)),
		)
		if err != nil {
			raw, _ := json.Marshal(map[string]any{"name": m.name, "kind": m.kind, "labels": m.labels})
			res.Rejected++
			res.Errors = append(res.Errors, rejection{Index: i, Reason: err.Error()})
			recs = append(recs, s.deadLetter(s.cfg.MetricsDLQTopic, "metric", info, raw, err))
			continue
		}
		res.Accepted++
		recs = append(recs, &kgo.Record{Topic: s.cfg.MetricsTopic, Key: []byte(m.name), Value: row.AppendJSON(nil)})
	}
	return res, recs
}

// parseExposition parses the Prometheus text format and expands every
// family into its samples, families in name order.
func parseExposition(body []byte, now time.Time) ([]metricSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []metricSample
	for _, n := range names {
		out = appendFamily(out, fams[n], now)
	}
	return out, nil
}

func appendFamily(out []metricSample, mf *dto.MetricFamily, now time.Time) []metricSample {
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
			out = append(out, metricSample{name: name, kind: kind, value: v, labels: l, ts: ts})
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
