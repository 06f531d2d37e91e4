package promwrite

import (
	"errors"
	"math"
	"testing"
)

// FuzzDecode checks that no input panics Decode, that what it accepts is
// within the limits, and that re-encoding a decoded request decodes to the
// same request.
func FuzzDecode(f *testing.F) {
	f.Add(encodeRequest([]series{
		{labels: named("up", "job", "node"), samples: []Sample{{1, 1000}, {math.Float64frombits(staleNaN), 2000}}, exemplars: 1},
		{labels: named("h"), histograms: 1},
	}, []Metadata{{TypeGauge, "up"}}))
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Add([]byte{0x4b, 0x08, 0x01, 0x4c})
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := Decode(in, testLimits)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v is neither malformed nor too large", err)
			}
			return
		}
		samples, labels := 0, 0
		ss := make([]series, 0, len(req.Series))
		for _, ts := range req.Series {
			samples += len(ts.Samples)
			labels += len(ts.Labels)
			ss = append(ss, series{labels: ts.Labels, samples: ts.Samples})
		}
		if len(req.Series) > testLimits.MaxSeries || samples > testLimits.MaxSamples ||
			labels > testLimits.MaxLabels || len(req.Metadata) > testLimits.MaxMetadata {
			t.Fatalf("accepted a request over the limits: %d series, %d samples, %d labels, %d metadata",
				len(req.Series), samples, labels, len(req.Metadata))
		}
		again, err := Decode(encodeRequest(ss, req.Metadata), testLimits)
		if err != nil {
			t.Fatalf("re-encoded request: %v", err)
		}
		if !sameRequest(req, again) {
			t.Fatalf("re-encoded request decodes to %+v, want %+v", again, req)
		}
	})
}

// sameRequest compares decoded series and metadata, sample values by bits
// (NaN is a value here).
func sameRequest(a, b *WriteRequest) bool {
	if len(a.Series) != len(b.Series) || len(a.Metadata) != len(b.Metadata) {
		return false
	}
	for i := range a.Series {
		x, y := a.Series[i], b.Series[i]
		if len(x.Labels) != len(y.Labels) || len(x.Samples) != len(y.Samples) {
			return false
		}
		for j := range x.Labels {
			if x.Labels[j] != y.Labels[j] {
				return false
			}
		}
		for j := range x.Samples {
			if math.Float64bits(x.Samples[j].Value) != math.Float64bits(y.Samples[j].Value) ||
				x.Samples[j].TimestampMs != y.Samples[j].TimestampMs {
				return false
			}
		}
	}
	for i := range a.Metadata {
		if a.Metadata[i] != b.Metadata[i] {
			return false
		}
	}
	return true
}
