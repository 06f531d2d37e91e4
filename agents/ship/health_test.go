package ship

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"millrace/internal/waitfor"
)

// Ready follows the shipper's life and the broker's answers: not started,
// ready once Start's first contact succeeded, not ready after the broker
// went away (once a refresh it asked for failed), closed.
func TestReady(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := New(Config{Brokers: c.ListenAddrs()}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("before Start: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("with the broker up: %v", err)
	}
	c.Close()
	waitfor.Until(t, 15*time.Second, "not ready once the broker went away", func() bool { return s.Ready(ctx) != nil })
	s.Close()
	if err := s.Ready(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
