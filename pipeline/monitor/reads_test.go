package monitor

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// blackHole accepts connections and never answers, as a hung broker does
// until its session expires. Closed at cleanup.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		accepting sync.WaitGroup
		mu        sync.Mutex
		held      []net.Conn
	)
	accepting.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		accepting.Wait()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Ping succeeds through the seed that answers while the first seed hangs,
// within less than the time the client gives one broker (so not by waiting
// the hung one out first), and fails when no seed answers.
func TestPingAsksSeedsAtOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hung := blackHole(t)
	ping := func(seeds ...string) error {
		cl, err := kgo.NewClient(append(ClientOpts(), kgo.SeedBrokers(seeds...))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), AnswerTimeout*2/3)
		defer cancel()
		return Ping(ctx, cl)
	}
	if err := ping(append([]string{hung}, c.ListenAddrs()...)...); err != nil {
		t.Errorf("ping with a hung first seed and a live one: %v", err)
	}
	if err := ping(hung); err == nil {
		t.Error("ping with only a hung seed succeeded")
	}
}
