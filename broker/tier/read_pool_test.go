package tier

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/internal/waitfor"
	"millrace/store/storetest"
)

// blockingReader answers each read with its request's MaxBytes as
// NextOffset, after release is closed (or its context ends).
type blockingReader struct {
	release chan struct{}
	started atomic.Int32
}

func (r *blockingReader) Read(ctx context.Context, req ReadRequest) (Batches, error) {
	r.started.Add(1)
	select {
	case <-r.release:
		return Batches{FirstOffset: req.Offset, NextOffset: int64(req.MaxBytes)}, nil
	case <-ctx.Done():
		return Batches{}, ctx.Err()
	}
}

func (r *blockingReader) OffsetForTimestamp(context.Context, string, int32, int64) (TimestampOffset, bool, error) {
	return TimestampOffset{}, false, nil
}

func (r *blockingReader) EpochAt(context.Context, string, int32, int64) (int32, error) {
	return -1, nil
}

// The pool runs at most Threads reads with MaxPending waiting and refuses
// the rest; each read's completion is signalled on its notify channel, and
// its byte limit is capped.
func TestReadPoolBoundsReads(t *testing.T) {
	t.Parallel()
	reader := &blockingReader{release: make(chan struct{})}
	p, err := NewReadPool(reader, ReadPoolConfig{Threads: 1, MaxPending: 1, MaxReadBytes: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	notify := make(chan struct{}, 1)
	first, ok := p.Submit(ReadRequest{Offset: 1, MaxBytes: 1 << 20}, notify)
	if !ok {
		t.Fatal("the first read was refused")
	}
	waitfor.Until(t, 10*time.Second, "the first read to start", func() bool { return reader.started.Load() == 1 })
	second, ok := p.Submit(ReadRequest{Offset: 2, MaxBytes: 10}, notify)
	if !ok {
		t.Fatal("the queued read was refused")
	}
	if _, ok := p.Submit(ReadRequest{Offset: 3}, notify); ok {
		t.Fatal("a read beyond the queue was taken")
	}
	close(reader.release)
	<-notify
	for _, r := range []*PendingRead{first, second} {
		<-r.Done()
	}
	if b, err := first.Result(); err != nil || b.NextOffset != 100 {
		t.Errorf("first read: %+v, %v; want its 1 MiB limit capped to 100", b, err)
	}
	if b, err := second.Result(); err != nil || b.NextOffset != 10 {
		t.Errorf("second read: %+v, %v", b, err)
	}
}

// Close cancels the read in progress, fails the queued one, and waits for
// the goroutines; a Submit after it is refused.
func TestReadPoolClose(t *testing.T) {
	t.Parallel()
	reader := &blockingReader{release: make(chan struct{})}
	p, err := NewReadPool(reader, ReadPoolConfig{Threads: 1, MaxPending: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	running, _ := p.Submit(ReadRequest{}, nil)
	waitfor.Until(t, 10*time.Second, "the read to start", func() bool { return reader.started.Load() == 1 })
	queued, _ := p.Submit(ReadRequest{}, nil)
	p.Close()
	for _, r := range []*PendingRead{running, queued} {
		<-r.Done()
		if _, err := r.Result(); !errors.Is(err, context.Canceled) {
			t.Errorf("read after Close: %v; want context.Canceled", err)
		}
	}
	if _, ok := p.Submit(ReadRequest{}, nil); ok {
		t.Error("a closed pool took a read")
	}
	if _, err := NewReadPool(reader, ReadPoolConfig{Threads: -1}, nil); err == nil {
		t.Error("a negative thread count was accepted")
	}
}

// The read side's cache and pool register the metrics side by side
// on one registry: remote fetch rate and latency, cache hits and misses.
func TestReadMetricsRegister(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	st := storetest.NewGated(t)
	storetest.Put(t, st, "a.log", testData(3))
	side, err := OpenReadSide(st, &fakeIndex{}, ReadConfig{}, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	if _, err := side.Cache.Object(context.Background(), "a.log").Size(); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{"millrace_remote_fetch_duration_seconds", "millrace_remote_fetch_cache_hits_total", "millrace_remote_fetch_cache_misses_total", "millrace_remote_fetch_cache_bytes", "millrace_remote_reads_total", "millrace_remote_read_duration_seconds"} {
		if !have[name] {
			t.Errorf("metric %s is not registered", name)
		}
	}
}
