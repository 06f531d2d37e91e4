package tier

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"millrace/store"
)

// gatedStore wraps a store: it counts Opens by name and, while gate is
// set, holds every Open until the gate is closed (a slow object store).
type gatedStore struct {
	store.Store
	mu    sync.Mutex // guards the following
	opens map[string]int
	gate  chan struct{}
}

func newGatedStore(t testing.TB) *gatedStore {
	t.Helper()
	st, err := store.NewFile(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &gatedStore{Store: st, opens: map[string]int{}}
}

func (s *gatedStore) Open(ctx context.Context, name string) (store.Reader, error) {
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

// hold makes Opens wait until the returned function is called.
func (s *gatedStore) hold() (release func()) {
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

func (s *gatedStore) openCount(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens[name]
}

// put publishes an object.
func (s *gatedStore) put(t testing.TB, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	obj, err := s.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Abort(ctx)
	if _, err := obj.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := obj.Publish(ctx); err != nil {
		t.Fatal(err)
	}
}
