package storetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"millrace/store"
)

// Gated is a store whose Opens can be held back, an object store that
// stops answering: while held, every Open waits until released or until
// its context ends. It counts Opens by name.
type Gated struct {
	store.Store
	mu    sync.Mutex // guards the following
	opens map[string]int
	gate  chan struct{}
}

// NewGated returns a Gated file store in a temporary directory of t,
// closed when the test ends.
func NewGated(t testing.TB) *Gated {
	t.Helper()
	st, err := store.NewFile(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &Gated{Store: st, opens: map[string]int{}}
}

// Open counts the Open and waits while the store is held.
func (s *Gated) Open(ctx context.Context, name string) (store.Reader, error) {
	s.mu.Lock()
	s.opens[name]++
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Open(ctx, name)
}

// Hold makes Opens wait until the returned function is called.
func (s *Gated) Hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	})
}

// Opens is how many times name was opened.
func (s *Gated) Opens(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens[name]
}

// Put publishes an object of s, failing the test if it cannot.
func Put(t testing.TB, s store.Store, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	o, err := s.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort(ctx)
	if _, err := o.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := o.Publish(ctx); err != nil {
		t.Fatal(err)
	}
}
