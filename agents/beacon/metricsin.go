package beacon

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/intake"
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
		samples, err := intake.ParseExposition(append(trimmed, '\n'), info.receivedAt)
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
		out = schemas.AppendJSONString(out, source)
	}
	rest := bytes.TrimSpace(trimmed[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// sampleRecords turns parsed exposition samples into metric events.
func (s *Server) sampleRecords(info reqInfo, source string, samples []intake.Sample) (*result, []*kgo.Record) {
	res := &result{}
	recs := make([]*kgo.Record, 0, len(samples))
	row := schemas.Metric.NewRow()
	for i, m := range samples {
		value, err := m.Encode(nil, row, source)
		if err != nil {
			raw, _ := json.Marshal(map[string]any{"name": m.Name, "kind": m.Kind, "labels": m.Labels})
			res.Rejected++
			res.Errors = append(res.Errors, rejection{Index: i, Reason: err.Error()})
			recs = append(recs, s.deadLetter(s.cfg.MetricsDLQTopic, "metric", info, raw, err))
			continue
		}
		res.Accepted++
		recs = append(recs, &kgo.Record{Topic: s.cfg.MetricsTopic, Key: []byte(m.Name), Value: value})
	}
	return res, recs
}
