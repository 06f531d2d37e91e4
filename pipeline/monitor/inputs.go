package monitor

import (
	"cmp"
	"slices"
	"strconv"
	"time"
)

// The inputs view: one row per input of a publishing process (the click
// beacon, the /v1/metrics intake, Prometheus remote write, OTLP per signal,
// syslog), with the rate it takes data at and the rate of its errors, both
// from the counters the inputs publish on the ops metrics topic. A row
// appears once a counter of its input has been published: the OTLP and
// syslog rows with their receivers, the beacon's once it took a request.

// Input is one input of one publishing process.
type Input struct {
	// Name is the input: beacon, metrics intake, remote write, otlp logs,
	// otlp metrics, otlp traces or syslog.
	Name string `json:"name"`
	// Source is the publishing process ("host:component").
	Source string `json:"source"`
	// Unit is what Rate and Total count ("events/s", "samples/s", ...).
	Unit string `json:"unit"`
	// Rate is Unit per second the broker acknowledged between the last
	// two publications; Total is the count since the process started.
	Rate  float64 `json:"rate"`
	Total float64 `json:"total"`
	// ErrorUnit is what ErrorRate and Errors count: "requests/s" for the
	// HTTP and gRPC inputs (answers with an error status), "messages/s"
	// for syslog (malformed, dropped or not delivered).
	ErrorUnit string    `json:"error_unit"`
	ErrorRate float64   `json:"error_rate"`
	Errors    float64   `json:"errors"`
	LastSeen  time.Time `json:"last_seen"`
	// Stale is set when the source stopped publishing: its rates are 0.
	Stale bool `json:"stale,omitempty"`
}

// inputPart says what a counter series adds to an input's row.
type inputPart int

const (
	partNone     inputPart = iota
	partAccepted           // items the input produced
	partErrors             // failed requests or lost messages
)

// inputDef is an input's row: its place in the table and its units.
type inputDef struct {
	order           int
	unit, errorUnit string
}

// inputDefs are the inputs shown, by name.
var inputDefs = map[string]inputDef{
	"beacon":         {0, "events/s", "requests/s"},
	"metrics intake": {1, "samples/s", "requests/s"},
	"remote write":   {2, "samples/s", "requests/s"},
	"otlp logs":      {3, "records/s", "requests/s"},
	"otlp metrics":   {4, "points/s", "requests/s"},
	"otlp traces":    {5, "spans/s", "requests/s"},
	"syslog":         {6, "messages/s", "messages/s"},
}

// failed reports an HTTP status of 400 or more, or a gRPC code other than
// OK, as the inputs' code labels write them.
func failed(code string) bool {
	if n, err := strconv.Atoi(code); err == nil {
		return n >= 400
	}
	return code != "" && code != "OK"
}

// inputRules map a counter, by name, to the input its series count for and
// how; the labels are those the inputs' packages give (agents/beacon,
// agents/promwrite, agents/otlp, agents/syslog metrics.go).
var inputRules = map[string]func(l map[string]string) (string, inputPart){
	"millrace_beacon_events_total": func(l map[string]string) (string, inputPart) {
		if l["result"] != "accepted" {
			return "", partNone
		}
		switch l["stream"] {
		case "click":
			return "beacon", partAccepted
		case "metric":
			return "metrics intake", partAccepted
		}
		return "", partNone
	},
	"millrace_beacon_requests_total": func(l map[string]string) (string, inputPart) {
		if !failed(l["code"]) {
			return "", partNone
		}
		switch l["route"] {
		case "/b.gif", "/v1/events":
			return "beacon", partErrors
		case "/v1/metrics":
			return "metrics intake", partErrors
		}
		return "", partNone
	},
	"millrace_promwrite_samples_produced_total": func(map[string]string) (string, inputPart) {
		return "remote write", partAccepted
	},
	"millrace_promwrite_requests_total": func(l map[string]string) (string, inputPart) {
		if !failed(l["code"]) {
			return "", partNone
		}
		return "remote write", partErrors
	},
	"millrace_otlp_items_produced_total": func(l map[string]string) (string, inputPart) {
		return otlpInput(l["signal"]), partAccepted
	},
	"millrace_otlp_requests_total": func(l map[string]string) (string, inputPart) {
		if !failed(l["code"]) {
			return "", partNone
		}
		return otlpInput(l["signal"]), partErrors
	},
	"millrace_syslog_produced_total": func(map[string]string) (string, inputPart) {
		return "syslog", partAccepted
	},
	"millrace_syslog_messages_total": func(l map[string]string) (string, inputPart) {
		if l["result"] != "malformed" {
			return "", partNone
		}
		return "syslog", partErrors
	},
	"millrace_syslog_dropped_total": func(map[string]string) (string, inputPart) {
		return "syslog", partErrors
	},
	"millrace_syslog_produce_errors_total": func(map[string]string) (string, inputPart) {
		return "syslog", partErrors
	},
}

// otlpInput names an OTLP signal's row; "" for a signal it does not know.
func otlpInput(signal string) string {
	switch signal {
	case "logs", "metrics", "traces":
		return "otlp " + signal
	}
	return ""
}

// inputs sums the input counters per (input, source). An input whose last
// sample is older than staleAfter has stopped publishing: it is kept,
// marked stale, with rates of 0.
func (c *counters) inputs(now time.Time, staleAfter time.Duration) []Input {
	type key struct{ name, source string }
	byKey := make(map[key]*Input)
	c.mu.Lock()
	for _, cs := range c.series {
		rule, ok := inputRules[cs.name]
		if !ok {
			continue
		}
		name, part := rule(cs.labels)
		if part == partNone || name == "" {
			continue
		}
		k := key{name, cs.source}
		in := byKey[k]
		if in == nil {
			def := inputDefs[name]
			in = &Input{Name: name, Source: cs.source, Unit: def.unit, ErrorUnit: def.errorUnit}
			byKey[k] = in
		}
		if part == partAccepted {
			in.Rate += cs.rate()
			in.Total += cs.last.value
		} else {
			in.ErrorRate += cs.rate()
			in.Errors += cs.last.value
		}
		if cs.last.ts.After(in.LastSeen) {
			in.LastSeen = cs.last.ts
		}
	}
	c.mu.Unlock()
	out := make([]Input, 0, len(byKey))
	for _, in := range byKey {
		if staleAfter > 0 && now.Sub(in.LastSeen) > staleAfter {
			in.Stale, in.Rate, in.ErrorRate = true, 0, 0
		}
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b Input) int {
		return cmp.Or(cmp.Compare(inputDefs[a.Name].order, inputDefs[b.Name].order), cmp.Compare(a.Source, b.Source))
	})
	return out
}
