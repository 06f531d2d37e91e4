package monitor

import (
	"encoding/json"
	"time"

	"millrace/agents/intake"
)

// opsRecord is a record of an ops topic: either one metric-sample event
// (docs/architecture.md §7; what /v1/metrics writes to ops.metrics) or a
// batch of a component's samples (intake.Batch; what the components write
// to _millrace.metrics). The union of both decodes either.
type opsRecord struct {
	Name    string               `json:"name"`
	Kind    string               `json:"kind"`
	Value   intake.Float         `json:"value"`
	Labels  map[string]string    `json:"labels"`
	TS      time.Time            `json:"ts"`
	Source  string               `json:"source"`
	Samples []intake.BatchSample `json:"samples"`
}

// decodeOps returns the samples of one ops record; false when the value is
// neither a sample nor a batch.
func decodeOps(value []byte) ([]metricSample, bool) {
	var r opsRecord
	if err := json.Unmarshal(value, &r); err != nil || r.TS.IsZero() {
		return nil, false
	}
	if r.Samples == nil {
		if r.Name == "" {
			return nil, false
		}
		return []metricSample{{Name: r.Name, Kind: r.Kind, Value: float64(r.Value), Labels: r.Labels, TS: r.TS, Source: r.Source}}, true
	}
	out := make([]metricSample, 0, len(r.Samples))
	for _, s := range r.Samples {
		if s.Name == "" {
			continue
		}
		out = append(out, metricSample{Name: s.Name, Kind: s.Kind, Value: float64(s.Value), Labels: s.Labels, TS: r.TS, Source: r.Source})
	}
	return out, true
}
