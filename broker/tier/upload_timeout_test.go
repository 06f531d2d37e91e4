package tier

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/store"
)

// hungStore takes an object's bytes but never answers its publication, as
// a stopped S3 server does: Publish returns only when its context ends.
type hungStore struct {
	store.Store
	publishes atomic.Int32
}

func (s *hungStore) Create(ctx context.Context, name string) (store.Object, error) {
	obj, err := s.Store.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &hungObject{Object: obj, s: s}, nil
}

type hungObject struct {
	store.Object
	s *hungStore
}

func (o *hungObject) Publish(ctx context.Context) error {
	o.s.publishes.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestUploadToAStoreThatStopsAnswering: an upload the store never answers
// fails once its deadline passes instead of holding the round (and every
// other partition's uploads and retention) until the store comes back; the
// failure is counted, one attempt per round, and nothing is recorded, so
// the log may delete nothing locally.
func TestUploadToAStoreThatStopsAnswering(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 2)
	p := leader(l, 1)
	hung := &hungStore{Store: e.store}
	cfg := DefaultConfig()
	cfg.Enable, cfg.URL = true, "file://"+e.store.Root()
	m, err := New(cfg, hung, e.coord, Host{Partitions: func() []Partition { return []Partition{p} }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.uploadTimeoutBase = 50 * time.Millisecond
	if d := m.uploadTimeout(1 << 20); d != m.uploadTimeoutBase+time.Second {
		t.Fatalf("a 1 MiB object's deadline %v, want %v: the base and a second per MiB", d, m.uploadTimeoutBase+time.Second)
	}
	for round := 1; round <= 2; round++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.RunOnce(context.Background())
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d still waits for the store after 20 s", round)
		}
		if got := hung.publishes.Load(); got != int32(round) {
			t.Fatalf("%d publications after %d rounds; want one per round", got, round)
		}
		if got := testutil.ToFloat64(m.metrics.uploadErrors); got != float64(round) {
			t.Fatalf("%v upload errors counted after %d rounds", got, round)
		}
	}
	if st := e.state(); len(st.Segments) != 0 {
		t.Fatalf("segments recorded without their objects: %v", ranges(st))
	}
	if l.RemoteEnd() != 0 {
		t.Fatalf("RemoteEnd %d with nothing uploaded", l.RemoteEnd())
	}
	if objects := e.objects(); len(objects) != 0 {
		t.Fatalf("objects published by failed uploads: %v", objects)
	}
}

// TestCopyQuotaPacesUploads: under remote.log.manager.copy.max.bytes.per.second
// a round's uploads take at least their bytes' time at that rate (less the
// tenth of a second the throttle lets through at once), each object's
// deadline allows for the rate, and every segment is still recorded.
func TestCopyQuotaPacesUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 2)
	p := leader(l, 1)
	const rate = 1000 // bytes per second: the two segments take over half a second
	cfg := DefaultConfig()
	cfg.Enable, cfg.URL = true, "file://"+e.store.Root()
	cfg.CopyMaxBytesPerSecond = rate
	m, err := New(cfg, e.store, e.coord, Host{Partitions: func() []Partition { return []Partition{p} }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, want := m.uploadTimeout(rate), m.uploadTimeoutBase+time.Second; d != want {
		t.Fatalf("the deadline of an object of one second's quota: %v, want %v", d, want)
	}
	start := time.Now()
	m.RunOnce(context.Background())
	took := time.Since(start)
	if st := e.state(); len(st.Segments) != 2 {
		t.Fatalf("remote ranges %v after a paced round, want both closed segments", ranges(st))
	}
	uploaded := testutil.ToFloat64(m.metrics.uploadedBytes)
	if least := time.Duration(uploaded/rate*float64(time.Second)) - 100*time.Millisecond; uploaded < rate/2 || took < least {
		t.Fatalf("%v bytes uploaded in %v; at %d bytes/s it takes at least %v", uploaded, took, rate, least)
	}
	cfg.CopyMaxBytesPerSecond = 0
	if err := cfg.Validate(); err == nil {
		t.Fatal("a copy quota of 0 bytes/s accepted")
	}
}
