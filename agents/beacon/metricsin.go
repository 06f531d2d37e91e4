package beacon

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/intake"
	"millrace/schemas"
)

// POST /v1/metrics takes samples in either of two forms, told apart by the
// body's first character (an exposition never starts with '{' or '['):
//
//   - JSON: one metric-sample object or an array of them, in the event
//     format of docs/architecture.md §7 ({"name","kind","value","labels","ts","source"});
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
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, body []byte) {
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
		samples, err := parseExpositionLimited(trimmed, s.cfg.MaxEventsPerRequest, info.receivedAt)
		switch {
		case errors.Is(err, errTooMany):
			s.fail(w, r, http.StatusRequestEntityTooLarge,
				"more than "+strconv.Itoa(s.cfg.MaxEventsPerRequest)+" samples in one request")
			return
		case err != nil:
			s.fail(w, r, http.StatusBadRequest, "prometheus text format: "+err.Error())
			return
		}
		res, recs = s.sampleRecords(info, source, samples)
	}
	if err := s.publish(r.Context(), recs, res.marks); err != nil {
		s.failPublish(w, r, err)
		return
	}
	s.countResult("metric", res)
	writeJSON(w, res.status(), res)
}

// parseExpositionLimited parses a Prometheus text body of at most limit
// samples. The parser reads through a lineGate, which ends the input with
// errTooMany at the first sample line past limit (every sample line is at
// least one sample) or the first HELP/TYPE line past 2*limit (a family
// needs at most one of each), so a body of many small lines is refused
// after reading limit of them instead of being parsed whole: a 1 MiB body
// holds some 75,000 sample lines, which the parser turned into some 70 MiB
// of families. A histogram or summary line can expand to more than one
// sample, so the count is checked again on the result.
func parseExpositionLimited(body []byte, limit int, now time.Time) ([]intake.Sample, error) {
	gate := &lineGate{
		r:          io.MultiReader(bytes.NewReader(body), strings.NewReader("\n")), // the format needs its final newline
		maxSamples: limit, maxMeta: 2 * limit, atStart: true,
	}
	samples, err := intake.ParseExpositionFrom(gate, now)
	if gate.cut || len(samples) > limit {
		return nil, errTooMany
	}
	return samples, err
}

// lineGate passes a Prometheus text exposition through while counting its
// sample lines and HELP/TYPE lines, and ends it with errTooMany just before
// the first line over a limit. It tracks lines across reads with a small
// state machine, so it needs no buffer of its own.
type lineGate struct {
	r          io.Reader
	maxSamples int
	maxMeta    int

	samples, meta int
	atStart       bool // at the start of a line, before its first non-blank byte
	inComment     bool // after the '#' of a comment, reading its keyword
	keyword       [5]byte
	keywordLen    int
	cut           bool
}

func (g *lineGate) Read(p []byte) (int, error) {
	if g.cut {
		return 0, errTooMany
	}
	n, err := g.r.Read(p)
	for i := 0; i < n; i++ {
		if !g.next(p[i]) {
			g.cut = true
			return i, errTooMany
		}
	}
	return n, err
}

// next takes one byte and reports whether it may pass.
func (g *lineGate) next(c byte) bool {
	switch {
	case c == '\n':
		g.atStart, g.inComment = true, false
	case g.atStart:
		switch c {
		case ' ', '\t':
		case '#':
			g.atStart, g.inComment, g.keywordLen = false, true, 0
		default:
			g.atStart = false
			g.samples++
			return g.samples <= g.maxSamples
		}
	case g.inComment:
		if c == ' ' || c == '\t' {
			if g.keywordLen == 0 {
				return true // blanks between '#' and the keyword
			}
			g.inComment = false
			if kw := string(g.keyword[:g.keywordLen]); kw == "HELP" || kw == "TYPE" {
				g.meta++
				return g.meta <= g.maxMeta
			}
			return true
		}
		if g.keywordLen == len(g.keyword) { // longer than any keyword: a plain comment
			g.inComment = false
			return true
		}
		g.keyword[g.keywordLen] = c
		g.keywordLen++
	}
	return true
}

// jsonSampleRecords validates JSON samples against the metric schema,
// filling ts and source when absent.
func (s *Server) jsonSampleRecords(info reqInfo, source string, raws []json.RawMessage) (*result, []*kgo.Record) {
	res := &result{}
	recs := make([]*kgo.Record, 0, len(raws))
	row := schemas.Metric.NewRow()
	newSource := s.newSourceGate(info)
	for i, raw := range raws {
		err := row.Decode(withDefaults(raw, info.receivedAt, source))
		if err != nil {
			res.Rejected++
			res.Errors = append(res.Errors, rejection{Index: i, Reason: err.Error()})
			recs = append(recs, s.deadLetter(s.cfg.MetricsDLQTopic, "metric", info, raw, err))
			res.marks = append(res.marks, auditMark{})
			continue
		}
		res.Accepted++
		name, _ := row.Get("name").(string)
		recs = append(recs, &kgo.Record{Topic: s.cfg.MetricsTopic, Key: []byte(name), Value: row.AppendJSON(nil)})
		src, _ := row.Get("source").(string)
		ts, _ := row.Get("ts").(time.Time)
		res.marks = append(res.marks, s.metricMark(src, ts, newSource))
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
	newSource := s.newSourceGate(info)
	for i, m := range samples {
		value, err := m.Encode(nil, row, source)
		if err != nil {
			raw, _ := json.Marshal(map[string]any{"name": m.Name, "kind": m.Kind, "labels": m.Labels})
			res.Rejected++
			res.Errors = append(res.Errors, rejection{Index: i, Reason: err.Error()})
			recs = append(recs, s.deadLetter(s.cfg.MetricsDLQTopic, "metric", info, raw, err))
			res.marks = append(res.marks, auditMark{})
			continue
		}
		res.Accepted++
		recs = append(recs, &kgo.Record{Topic: s.cfg.MetricsTopic, Key: []byte(m.Name), Value: value})
		res.marks = append(res.marks, s.metricMark(source, m.TS, newSource))
	}
	return res, recs
}
