// Package promwrite takes Prometheus remote write 1.0 requests (POST
// /api/v1/write from a Prometheus server's remote_write) and produces every
// float sample as a metric-sample event (docs/architecture.md §7) on the
// metrics topic through agents/ship, the same events the beacon's POST
// /v1/metrics makes (agents/intake does the encoding for both).
//
// What remote write carries and millrace does not keep: native histograms
// and exemplars are skipped and counted
// (millrace_promwrite_samples_dropped_total{reason="native_histogram"} and
// {reason="exemplar"}); stale markers, the NaN Prometheus writes when a
// series disappears, are dropped and counted ({reason="stale"}).
package promwrite

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The request body, once snappy-decoded, is a protobuf prometheus.WriteRequest
// (remote write 1.0, prometheus/prompb/remote.proto and types.proto). The
// decoder reads only these fields and skips any other, as protobuf readers do:
//
//	WriteRequest   { repeated TimeSeries timeseries = 1; repeated MetricMetadata metadata = 3; }
//	TimeSeries     { repeated Label labels = 1; repeated Sample samples = 2;
//	                 repeated Exemplar exemplars = 3 (counted); repeated Histogram histograms = 4 (counted); }
//	Label          { string name = 1; string value = 2; }
//	Sample         { double value = 1; int64 timestamp = 2; }   // timestamp in ms since the epoch
//	MetricMetadata { MetricType type = 1; string metric_family_name = 2; string help = 4; string unit = 5; }
const (
	fieldSeries   protowire.Number = 1 // WriteRequest.timeseries
	fieldMetadata protowire.Number = 3 // WriteRequest.metadata

	fieldLabels     protowire.Number = 1 // TimeSeries.labels
	fieldSamples    protowire.Number = 2 // TimeSeries.samples
	fieldExemplars  protowire.Number = 3 // TimeSeries.exemplars
	fieldHistograms protowire.Number = 4 // TimeSeries.histograms

	fieldLabelName  protowire.Number = 1 // Label.name
	fieldLabelValue protowire.Number = 2 // Label.value

	fieldSampleValue     protowire.Number = 1 // Sample.value
	fieldSampleTimestamp protowire.Number = 2 // Sample.timestamp

	fieldMetadataType   protowire.Number = 1 // MetricMetadata.type
	fieldMetadataFamily protowire.Number = 2 // MetricMetadata.metric_family_name
)

// MetricType is MetricMetadata.type (prompb.MetricMetadata_MetricType).
type MetricType uint64

// The metric types of remote write 1.0.
const (
	TypeUnknown        MetricType = 0
	TypeCounter        MetricType = 1
	TypeGauge          MetricType = 2
	TypeHistogram      MetricType = 3
	TypeGaugeHistogram MetricType = 4
	TypeSummary        MetricType = 5
	TypeInfo           MetricType = 6
	TypeStateset       MetricType = 7
)

// WriteRequest is a decoded remote write request: the series that carry
// float samples, the metadata, and how much was skipped.
type WriteRequest struct {
	// Series holds the series with at least one float sample; a series of
	// native histograms only is counted in Histograms and not kept.
	Series   []TimeSeries
	Metadata []Metadata
	// Histograms and Exemplars count the native histograms and exemplars
	// the request carried; neither is decoded.
	Histograms int
	Exemplars  int
}

// TimeSeries is one series: its labels (__name__ among them) and samples.
type TimeSeries struct {
	Labels  []Label
	Samples []Sample
}

// Label is one label pair.
type Label struct {
	Name, Value string
}

// Sample is one float sample.
type Sample struct {
	Value       float64
	TimestampMs int64
}

// Metadata is a metric family's type (help and unit are not kept).
type Metadata struct {
	Type   MetricType
	Family string
}

// Limits bound what one request may hold; Decode refuses a request over any
// of them with an error wrapping ErrTooLarge before allocating for it.
type Limits struct {
	MaxSeries   int // series, counting those of native histograms only
	MaxSamples  int // float samples
	MaxLabels   int // labels over all series
	MaxMetadata int // metadata entries
}

var (
	// ErrMalformed is wrapped by every error about a request that is no
	// valid WriteRequest: sending it again cannot help.
	ErrMalformed = errors.New("malformed remote write request")
	// ErrTooLarge is wrapped by the errors of a request over a Limits bound.
	ErrTooLarge = errors.New("remote write request too large")
)

// counts is what the first pass finds.
type counts struct {
	series, keptSeries, samples, labels, keptLabels, metadata, histograms, exemplars int
}

// Decode decodes a snappy-decoded remote write request within lim.
//
// It reads the input twice: the first pass checks the whole structure and
// counts series, labels, samples and metadata without allocating, so a
// request over a limit is refused before any memory is spent on it; the
// second fills slices allocated at their exact sizes. What it allocates is
// then bounded by the counts: 48 bytes per kept series, 32 per label, 16 per
// sample, 24 per metadata entry, plus the strings (at most the input's
// size; repeated label names and values share one copy). Every kept element
// takes at least 2 input bytes, so that is also at most about 24 times the
// input's size.
func Decode(data []byte, lim Limits) (*WriteRequest, error) {
	var c counts
	err := eachField(data, "WriteRequest", func(f field) error {
		switch f.num {
		case fieldSeries:
			if err := f.want(protowire.BytesType, "WriteRequest.timeseries"); err != nil {
				return err
			}
			sc, err := countSeries(f.b)
			if err != nil {
				return err
			}
			c.series++
			if sc.samples > 0 {
				c.keptSeries++
				c.keptLabels += sc.labels
			}
			c.samples += sc.samples
			c.labels += sc.labels
			c.histograms += sc.histograms
			c.exemplars += sc.exemplars
		case fieldMetadata:
			if err := f.want(protowire.BytesType, "WriteRequest.metadata"); err != nil {
				return err
			}
			if _, err := decodeMetadata(f.b, nil); err != nil {
				return err
			}
			c.metadata++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, l := range []struct {
		what      string
		got, most int
	}{
		{"series", c.series, lim.MaxSeries},
		{"samples", c.samples, lim.MaxSamples},
		{"labels", c.labels, lim.MaxLabels},
		{"metadata entries", c.metadata, lim.MaxMetadata},
	} {
		if l.got > l.most {
			return nil, fmt.Errorf("%w: %d %s, at most %d allowed (lower the remote_write queue_config's max_samples_per_send)",
				ErrTooLarge, l.got, l.what, l.most)
		}
	}
	return fill(data, c), nil
}

// fill is Decode's second pass over data, which the first found valid.
func fill(data []byte, c counts) *WriteRequest {
	req := &WriteRequest{
		Series:     make([]TimeSeries, 0, c.keptSeries),
		Metadata:   make([]Metadata, 0, c.metadata),
		Histograms: c.histograms,
		Exemplars:  c.exemplars,
	}
	labels := make([]Label, c.keptLabels)
	samples := make([]Sample, c.samples)
	in := interner{}
	// The first pass checked every field, so the errors below cannot happen.
	_ = eachField(data, "", func(f field) error {
		switch {
		case f.num == fieldSeries:
			sc, _ := countSeries(f.b)
			if sc.samples == 0 {
				return nil
			}
			ts := TimeSeries{Labels: labels[:0:sc.labels], Samples: samples[:0:sc.samples]}
			labels, samples = labels[sc.labels:], samples[sc.samples:]
			_ = eachField(f.b, "", func(f field) error {
				switch f.num {
				case fieldLabels:
					ts.Labels = append(ts.Labels, decodeLabel(f.b, &in))
				case fieldSamples:
					ts.Samples = append(ts.Samples, decodeSample(f.b))
				}
				return nil
			})
			req.Series = append(req.Series, ts)
		case f.num == fieldMetadata:
			m, _ := decodeMetadata(f.b, &in)
			req.Metadata = append(req.Metadata, m)
		}
		return nil
	})
	return req
}

// countSeries checks a TimeSeries and counts what it holds.
func countSeries(b []byte) (counts, error) {
	var c counts
	err := eachField(b, "TimeSeries", func(f field) error {
		switch f.num {
		case fieldLabels:
			if err := f.want(protowire.BytesType, "TimeSeries.labels"); err != nil {
				return err
			}
			c.labels++
			return eachField(f.b, "Label", func(f field) error {
				if f.num == fieldLabelName || f.num == fieldLabelValue {
					return f.want(protowire.BytesType, "Label.name and Label.value")
				}
				return nil
			})
		case fieldSamples:
			if err := f.want(protowire.BytesType, "TimeSeries.samples"); err != nil {
				return err
			}
			c.samples++
			return eachField(f.b, "Sample", func(f field) error {
				switch f.num {
				case fieldSampleValue:
					return f.want(protowire.Fixed64Type, "Sample.value")
				case fieldSampleTimestamp:
					return f.want(protowire.VarintType, "Sample.timestamp")
				}
				return nil
			})
		case fieldExemplars:
			c.exemplars++
			return f.want(protowire.BytesType, "TimeSeries.exemplars")
		case fieldHistograms:
			c.histograms++
			return f.want(protowire.BytesType, "TimeSeries.histograms")
		}
		return nil
	})
	return c, err
}

// decodeLabel decodes a Label the first pass checked.
func decodeLabel(b []byte, in *interner) Label {
	var l Label
	_ = eachField(b, "", func(f field) error {
		switch f.num {
		case fieldLabelName:
			l.Name = in.string(f.b)
		case fieldLabelValue:
			l.Value = in.string(f.b)
		}
		return nil
	})
	return l
}

// decodeSample decodes a Sample the first pass checked. A repeated field
// keeps its last value, as protobuf decoders do.
func decodeSample(b []byte) Sample {
	var s Sample
	_ = eachField(b, "", func(f field) error {
		switch f.num {
		case fieldSampleValue:
			s.Value = math.Float64frombits(f.u)
		case fieldSampleTimestamp:
			s.TimestampMs = int64(f.u)
		}
		return nil
	})
	return s
}

// decodeMetadata checks a MetricMetadata and, when in is not nil, decodes it.
func decodeMetadata(b []byte, in *interner) (Metadata, error) {
	var m Metadata
	err := eachField(b, "MetricMetadata", func(f field) error {
		switch f.num {
		case fieldMetadataType:
			if err := f.want(protowire.VarintType, "MetricMetadata.type"); err != nil {
				return err
			}
			m.Type = MetricType(f.u)
		case fieldMetadataFamily:
			if err := f.want(protowire.BytesType, "MetricMetadata.metric_family_name"); err != nil {
				return err
			}
			if in != nil {
				m.Family = in.string(f.b)
			}
		}
		return nil
	})
	return m, err
}

// field is one decoded protobuf field.
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64 // a varint, fixed32 or fixed64 value
	b   []byte // a bytes value (a sub-slice of the input)
}

// want checks the field's wire type.
func (f field) want(typ protowire.Type, name string) error {
	if f.typ != typ {
		return fmt.Errorf("%w: %s has wire type %d, want %d", ErrMalformed, name, f.typ, typ)
	}
	return nil
}

// eachField calls fn for every field of the message b, skipping groups
// (deprecated, never in remote write) whole. msg names the message in errors.
func eachField(b []byte, msg string, fn func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %s: %v", ErrMalformed, msg, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			f.u, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.u = uint64(v)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %s field %d: %v", ErrMalformed, msg, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// maxInterned bounds the strings an interner keeps: enough for the label
// names and common values (job, instance) of a request, while a request of
// unique values stops growing the map.
const maxInterned = 4096

// interner gives equal byte strings one string, so the label names every
// series repeats are copied once per request.
type interner map[string]string

func (in *interner) string(b []byte) string {
	if s, ok := (*in)[string(b)]; ok { // the conversion in a lookup does not allocate
		return s
	}
	s := string(b)
	if len(*in) < maxInterned {
		(*in)[s] = s
	}
	return s
}
