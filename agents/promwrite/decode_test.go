package promwrite

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

var testLimits = Limits{MaxSeries: 10, MaxSamples: 10, MaxLabels: 20, MaxMetadata: 5}

// appendField appends a field of any wire type with an empty or zero value.
func appendField(b []byte, num protowire.Number, typ protowire.Type) []byte {
	b = protowire.AppendTag(b, num, typ)
	switch typ {
	case protowire.VarintType:
		return protowire.AppendVarint(b, 7)
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(b, 7)
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(b, 7)
	case protowire.StartGroupType:
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	return protowire.AppendBytes(b, []byte("xyz"))
}

// TestDecode decodes requests built as prompb marshals them. Protobuf
// rules: unknown fields of any wire type are skipped, a repeated scalar
// keeps its last value, and a known field of the wrong wire type is an
// error (protobuf-go's behaviour).
func TestDecode(t *testing.T) {
	t.Parallel()
	up := series{labels: named("up", "job", "node"), samples: []Sample{{1, 1000}, {0, 2000}}}
	withUnknown := func() []byte {
		l := appendField(encodeLabel(Label{"__name__", "up"}), 3, protowire.Fixed32Type)
		s := appendField(encodeSample(Sample{5, 9}), 7, protowire.BytesType)
		var ts []byte
		ts = appendField(ts, 9, protowire.StartGroupType)
		ts = protowire.AppendTag(ts, fieldLabels, protowire.BytesType)
		ts = protowire.AppendBytes(ts, l)
		ts = protowire.AppendTag(ts, fieldSamples, protowire.BytesType)
		ts = protowire.AppendBytes(ts, s)
		b := appendField(nil, 2, protowire.VarintType) // field 2 is reserved in WriteRequest
		b = protowire.AppendTag(b, fieldSeries, protowire.BytesType)
		b = protowire.AppendBytes(b, ts)
		return appendField(b, 17, protowire.Fixed64Type)
	}
	repeatedValue := func() []byte {
		s := encodeSample(Sample{1, 1})
		s = protowire.AppendTag(s, fieldSampleValue, protowire.Fixed64Type)
		s = protowire.AppendFixed64(s, math.Float64bits(2))
		var ts []byte
		ts = protowire.AppendTag(ts, fieldSamples, protowire.BytesType)
		ts = protowire.AppendBytes(ts, s)
		b := protowire.AppendTag(nil, fieldSeries, protowire.BytesType)
		return protowire.AppendBytes(b, ts)
	}
	tests := []struct {
		name string
		in   []byte
		want *WriteRequest
	}{
		{"empty", nil, &WriteRequest{Series: []TimeSeries{}, Metadata: []Metadata{}}},
		{"one series", encodeRequest([]series{up}, nil),
			&WriteRequest{Series: []TimeSeries{{Labels: up.labels, Samples: up.samples}}, Metadata: []Metadata{}}},
		{"unknown fields skipped", withUnknown(),
			&WriteRequest{Series: []TimeSeries{{Labels: named("up"), Samples: []Sample{{5, 9}}}}, Metadata: []Metadata{}}},
		{"last value wins", repeatedValue(),
			&WriteRequest{Series: []TimeSeries{{Labels: []Label{}, Samples: []Sample{{2, 1}}}}, Metadata: []Metadata{}}},
		{"native histograms and exemplars counted, histogram-only series not kept",
			encodeRequest([]series{{labels: named("h"), histograms: 2}, {labels: named("c"), samples: []Sample{{1, 1}}, exemplars: 3}}, nil),
			&WriteRequest{Series: []TimeSeries{{Labels: named("c"), Samples: []Sample{{1, 1}}}}, Metadata: []Metadata{}, Histograms: 2, Exemplars: 3}},
		{"metadata", encodeRequest(nil, []Metadata{{TypeCounter, "http_requests_total"}, {TypeHistogram, "latency_seconds"}}),
			&WriteRequest{Series: []TimeSeries{}, Metadata: []Metadata{{TypeCounter, "http_requests_total"}, {TypeHistogram, "latency_seconds"}}}},
		{"negative timestamp", encodeRequest([]series{{labels: named("old"), samples: []Sample{{1, -5}}}}, nil),
			&WriteRequest{Series: []TimeSeries{{Labels: named("old"), Samples: []Sample{{1, -5}}}}, Metadata: []Metadata{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.in, testLimits)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestDecodeRefuses checks that malformed input is ErrMalformed and input
// over a limit is ErrTooLarge.
func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	valid := encodeRequest([]series{{labels: named("up"), samples: []Sample{{1, 1}}}}, nil)
	wrongType := func(num protowire.Number, typ protowire.Type, inner func([]byte) []byte) []byte {
		return inner(appendField(nil, num, typ))
	}
	inSeries := func(b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, fieldSeries, protowire.BytesType), b)
	}
	inSample := func(b []byte) []byte {
		return inSeries(protowire.AppendBytes(protowire.AppendTag(nil, fieldSamples, protowire.BytesType), b))
	}
	many := func(n int, s series) []series {
		out := make([]series, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"truncated", valid[:len(valid)-1], ErrMalformed},
		{"length past the end", []byte{0x0a, 0x10, 0x0a}, ErrMalformed},
		{"bad tag", []byte{0x80}, ErrMalformed},
		{"field number 0", []byte{0x00, 0x01}, ErrMalformed},
		{"timeseries as varint", wrongType(fieldSeries, protowire.VarintType, func(b []byte) []byte { return b }), ErrMalformed},
		{"sample value as varint", wrongType(fieldSampleValue, protowire.VarintType, inSample), ErrMalformed},
		{"sample timestamp as bytes", wrongType(fieldSampleTimestamp, protowire.BytesType, inSample), ErrMalformed},
		{"label as fixed64", wrongType(fieldLabels, protowire.Fixed64Type, inSeries), ErrMalformed},
		{"metadata type as bytes", protowire.AppendBytes(protowire.AppendTag(nil, fieldMetadata, protowire.BytesType),
			appendField(nil, fieldMetadataType, protowire.BytesType)), ErrMalformed},
		{"unclosed group", protowire.AppendTag(nil, 9, protowire.StartGroupType), ErrMalformed},
		{"too many series", encodeRequest(many(11, series{labels: named("h"), histograms: 1}), nil), ErrTooLarge},
		{"too many samples", encodeRequest([]series{{labels: named("x"), samples: make([]Sample, 11)}}, nil), ErrTooLarge},
		{"too many labels", encodeRequest(many(3, series{labels: make([]Label, 7)}), nil), ErrTooLarge},
		{"too many metadata", encodeRequest(nil, make([]Metadata, 6)), ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.in, testLimits)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestDecodeAllocation checks Decode's bound on what it allocates: about
// 24 times the input at worst (series of one empty label and one empty
// sample, the smallest elements that are kept).
func TestDecodeAllocation(t *testing.T) {
	var ts []byte
	ts = protowire.AppendTag(ts, fieldLabels, protowire.BytesType)
	ts = protowire.AppendBytes(ts, nil)
	ts = protowire.AppendTag(ts, fieldSamples, protowire.BytesType)
	ts = protowire.AppendBytes(ts, nil)
	var in []byte
	for range 10_000 {
		in = protowire.AppendTag(in, fieldSeries, protowire.BytesType)
		in = protowire.AppendBytes(in, ts)
	}
	lim := Limits{MaxSeries: 1 << 20, MaxSamples: 1 << 20, MaxLabels: 1 << 20, MaxMetadata: 1}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	req, err := Decode(in, lim)
	runtime.ReadMemStats(&after)
	if err != nil || len(req.Series) != 10_000 {
		t.Fatalf("decoded %d series, err %v", len(req.Series), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(24*len(in)+64<<10) {
		t.Fatalf("decoding %d bytes allocated %d bytes, more than 24 times", len(in), got)
	}
}
