package intake

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A process's own metrics go to the ops topic (_millrace.metrics) as
// batches: one record per component and interval carrying all of that
// component's samples, instead of one record per sample. An idle appliance
// has a few hundred series (the Go runtime's alone are about a hundred);
// one record each every 10 s was about 47 records a second of nothing
// happening. Batched, an idle process writes as many records per interval
// as it has components (tail, ship, lake, broker, runtime, ...), whatever
// its series count. The record format:
//
//	{"source":"web-1:millrace-up","component":"tail","ts":"2026-12-03T10:00:00Z",
//	 "samples":[{"name":"millrace_tail_lines_read_total","kind":"counter","value":42,"labels":{"input":"app"}}, ...]}
//
// A sample carries the batch's source and ts. Values that JSON cannot hold
// are the strings "NaN", "+Inf" and "-Inf", as in the metric-sample event.

// MaxBatchSamples is the most samples one batch record carries; a component
// with more (a broker with thousands of partitions) writes several records,
// so no record approaches the broker's size limit.
const MaxBatchSamples = 2000

// Batch is one ops-topic record: a component's samples at one time.
type Batch struct {
	Source    string        `json:"source"`
	Component string        `json:"component"`
	TS        time.Time     `json:"ts"`
	Samples   []BatchSample `json:"samples"`
}

// BatchSample is a sample inside a Batch: the metric-sample event without
// the ts and source its batch holds.
type BatchSample struct {
	Name   string            `json:"name"`
	Kind   string            `json:"kind"`
	Value  Float             `json:"value"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Float is a sample value in JSON: a number, or "NaN", "+Inf", "-Inf".
type Float float64

// MarshalJSON writes finite values as numbers and the rest as strings.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number or one of the three strings.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		switch string(b) {
		case `"NaN"`:
			*f = Float(math.NaN())
		case `"+Inf"`, `"Inf"`:
			*f = Float(math.Inf(1))
		case `"-Inf"`:
			*f = Float(math.Inf(-1))
		default:
			return fmt.Errorf("sample value %s is no number", b)
		}
		return nil
	}
	v, err := strconv.ParseFloat(string(bytes.TrimSpace(b)), 64)
	if err != nil {
		return fmt.Errorf("sample value %s is no number", b)
	}
	*f = Float(v)
	return nil
}

// ComponentOf names the component a metric belongs to, from its name:
// millrace_<component>_... gives <component> (tail, ship, lake, beacon,
// broker, ...); the Go and process collectors' series are "runtime";
// anything else is "other".
func ComponentOf(name string) string {
	if rest, ok := strings.CutPrefix(name, "millrace_"); ok {
		if i := strings.IndexByte(rest, '_'); i > 0 {
			return rest[:i]
		}
		return "other"
	}
	for _, p := range []string{"go_", "process_", "promhttp_"} {
		if strings.HasPrefix(name, p) {
			return "runtime"
		}
	}
	return "other"
}

// Batches groups samples by component (ComponentOf), in component order,
// MaxBatchSamples at most per batch, all stamped with source and ts.
func Batches(samples []Sample, source string, ts time.Time) []Batch {
	byComponent := make(map[string][]BatchSample)
	for _, s := range samples {
		c := ComponentOf(s.Name)
		var labels map[string]string
		if len(s.Labels) > 0 {
			labels = s.Labels
		}
		byComponent[c] = append(byComponent[c], BatchSample{Name: s.Name, Kind: s.Kind, Value: Float(s.Value), Labels: labels})
	}
	names := make([]string, 0, len(byComponent))
	for c := range byComponent {
		names = append(names, c)
	}
	slices.SortFunc(names, cmp.Compare)
	var out []Batch
	for _, c := range names {
		all := byComponent[c]
		for len(all) > 0 {
			n := min(len(all), MaxBatchSamples)
			out = append(out, Batch{Source: source, Component: c, TS: ts, Samples: all[:n:n]})
			all = all[n:]
		}
	}
	return out
}

// Encode returns the batch's JSON.
func (b Batch) Encode() ([]byte, error) { return json.Marshal(b) }
