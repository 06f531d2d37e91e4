package promwrite

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"millrace/agents/ship"
	"millrace/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// series is a TimeSeries to encode, with native histograms and exemplars
// as empty messages (the decoder only counts them).
type series struct {
	labels     []Label
	samples    []Sample
	histograms int
	exemplars  int
}

// encodeRequest builds a WriteRequest as prompb's generated code marshals
// it (fields in number order).
func encodeRequest(ss []series, md []Metadata) []byte {
	var b []byte
	for _, s := range ss {
		b = protowire.AppendTag(b, fieldSeries, protowire.BytesType)
		b = protowire.AppendBytes(b, encodeSeries(s))
	}
	for _, m := range md {
		var mb []byte
		mb = protowire.AppendTag(mb, fieldMetadataType, protowire.VarintType)
		mb = protowire.AppendVarint(mb, uint64(m.Type))
		mb = protowire.AppendTag(mb, fieldMetadataFamily, protowire.BytesType)
		mb = protowire.AppendString(mb, m.Family)
		mb = protowire.AppendTag(mb, 4, protowire.BytesType) // help
		mb = protowire.AppendString(mb, "help text")
		b = protowire.AppendTag(b, fieldMetadata, protowire.BytesType)
		b = protowire.AppendBytes(b, mb)
	}
	return b
}

func encodeSeries(s series) []byte {
	var b []byte
	for _, l := range s.labels {
		b = protowire.AppendTag(b, fieldLabels, protowire.BytesType)
		b = protowire.AppendBytes(b, encodeLabel(l))
	}
	for _, sm := range s.samples {
		b = protowire.AppendTag(b, fieldSamples, protowire.BytesType)
		b = protowire.AppendBytes(b, encodeSample(sm))
	}
	for range s.exemplars {
		b = protowire.AppendTag(b, fieldExemplars, protowire.BytesType)
		b = protowire.AppendBytes(b, nil)
	}
	for range s.histograms {
		b = protowire.AppendTag(b, fieldHistograms, protowire.BytesType)
		b = protowire.AppendBytes(b, nil)
	}
	return b
}

func encodeLabel(l Label) []byte {
	var b []byte
	b = protowire.AppendTag(b, fieldLabelName, protowire.BytesType)
	b = protowire.AppendString(b, l.Name)
	b = protowire.AppendTag(b, fieldLabelValue, protowire.BytesType)
	return protowire.AppendString(b, l.Value)
}

func encodeSample(s Sample) []byte {
	var b []byte
	b = protowire.AppendTag(b, fieldSampleValue, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, math.Float64bits(s.Value))
	b = protowire.AppendTag(b, fieldSampleTimestamp, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(s.TimestampMs))
}

// named returns the labels of a series called name.
func named(name string, pairs ...string) []Label {
	ls := []Label{{"__name__", name}}
	for i := 0; i+1 < len(pairs); i += 2 {
		ls = append(ls, Label{pairs[i], pairs[i+1]})
	}
	return ls
}

// fakeProducer records what it is given and acknowledges at once with err.
type fakeProducer struct {
	cfg ship.Config

	mu       sync.Mutex // guards the following
	recs     []*kgo.Record
	err      error // each record's acknowledgement
	tryErr   error // TryProduce's answer
	buffered int64
}

func newFakeProducer() *fakeProducer {
	return &fakeProducer{cfg: ship.Config{MaxBufferedRecords: ship.DefaultMaxBufferedRecords, MaxBufferedBytes: ship.DefaultMaxBufferedBytes}}
}

func (p *fakeProducer) TryProduce(_ context.Context, rec *kgo.Record, ack ship.AckFunc) error {
	p.mu.Lock()
	if p.tryErr != nil {
		p.mu.Unlock()
		return p.tryErr
	}
	err := p.err
	if err == nil {
		p.recs = append(p.recs, rec)
	}
	p.mu.Unlock()
	ack(rec, err)
	return nil
}

func (p *fakeProducer) BufferedRecords() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buffered
}

func (p *fakeProducer) BufferedBytes() int64                      { return 0 }
func (p *fakeProducer) Config() ship.Config                       { return p.cfg }
func (p *fakeProducer) ReadyFor(context.Context, ...string) error { return nil }
func (p *fakeProducer) records() []*kgo.Record                    { p.mu.Lock(); defer p.mu.Unlock(); return p.recs }
func (p *fakeProducer) set(err, tryErr error) {
	p.mu.Lock()
	p.err, p.tryErr = err, tryErr
	p.mu.Unlock()
}
func (p *fakeProducer) setBuffered(n int64) { p.mu.Lock(); p.buffered = n; p.mu.Unlock() }

// nan is a NaN that is no stale marker.
func nan() float64 { return math.NaN() }
