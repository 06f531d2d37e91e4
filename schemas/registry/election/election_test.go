package election

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/internal/leaktest"
	"millrace/internal/waitfor"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const limit = 10 * time.Second

// candidate is one registry's election with a fake log claim.
type candidate struct {
	store    coord.Store
	e        *Election
	claims   atomic.Int32
	releases atomic.Int32
	stop     func()
}

func openServer(t *testing.T) *embedded.Server {
	t.Helper()
	srv, err := embedded.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// start runs a candidate on a session of its own; claim, when set, is the
// log's Claim; options change its configuration.
func start(t *testing.T, srv *embedded.Server, url string, claim func(context.Context) error, options ...func(*Config)) *candidate {
	t.Helper()
	store, err := srv.Session()
	if err != nil {
		t.Fatal(err)
	}
	c := &candidate{store: store}
	cfg := Config{Store: store, URL: url, RetryInterval: 10 * time.Millisecond,
		Claim: func(ctx context.Context) error {
			c.claims.Add(1)
			if claim != nil {
				return claim(ctx)
			}
			return nil
		},
		Release: func() { c.releases.Add(1) },
	}
	for _, o := range options {
		o(&cfg)
	}
	c.e, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.e.Run(ctx) }()
	stopped := false
	c.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			store.Close()
		}
	}
	t.Cleanup(c.stop)
	return c
}

func (c *candidate) primary() bool { self, _ := c.e.Primary(); return self }

func (c *candidate) sees(url string) bool {
	self, u := c.e.Primary()
	return !self && u == url
}

// TestOnePrimaryAndFailover: of two registries one is primary and the
// other learns its URL; closing the primary's session makes the other
// primary, after its claim, and the first stops.
func TestOnePrimaryAndFailover(t *testing.T) {
	t.Parallel()
	srv := openServer(t)
	a := start(t, srv, "http://a:8081", nil)
	waitfor.Until(t, limit, "a primary", a.primary)
	b := start(t, srv, "http://b:8081", nil)
	waitfor.Until(t, limit, "b to learn a's URL", func() bool { return b.sees("http://a:8081") })
	if b.claims.Load() != 0 {
		t.Fatalf("b claimed the log %d times while a was primary", b.claims.Load())
	}

	// The node holds the primary's URL as JSON.
	data, _, err := b.store.Get(DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	var n node
	if err := json.Unmarshal(data, &n); err != nil || n.URL != "http://a:8081" || n.Version != 1 {
		t.Fatalf("node = %s (%v), want a's URL", data, err)
	}

	// a's session ends (as when its broker dies): b takes over.
	a.store.Close()
	waitfor.Until(t, limit, "b primary after a's session closed", b.primary)
	if b.claims.Load() != 1 {
		t.Fatalf("b claimed the log %d times, want 1", b.claims.Load())
	}
	waitfor.Until(t, limit, "a to step down", func() bool { return !a.primary() })
	if a.releases.Load() != 1 {
		t.Fatalf("a released %d times, want 1", a.releases.Load())
	}
	a.stop()

	// A third registry learns b's URL.
	c := start(t, srv, "http://c:8081", nil)
	waitfor.Until(t, limit, "c to learn b's URL", func() bool { return c.sees("http://b:8081") })
}

// TestPrimaryOnlyOnceClaimed: the winner reports itself primary only once
// its claim (the log's fencing of the previous writer) has returned, and a
// failed claim gives the node up for another registry.
func TestPrimaryOnlyOnceClaimed(t *testing.T) {
	t.Parallel()
	srv := openServer(t)
	release := make(chan struct{})
	var failing atomic.Bool
	failing.Store(true)
	a := start(t, srv, "http://a:8081", func(ctx context.Context) error {
		if failing.Load() {
			return errors.New("the broker is not serving yet")
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	waitfor.Until(t, limit, "a's claim to be tried again after failing", func() bool { return a.claims.Load() >= 2 })
	if a.primary() {
		t.Fatal("a is primary although its claim failed")
	}
	failing.Store(false)
	waitfor.Until(t, limit, "a's next claim", func() bool { return a.claims.Load() >= 3 })
	if a.primary() {
		t.Fatal("a is primary before its claim returned")
	}
	close(release)
	waitfor.Until(t, limit, "a primary once claimed", a.primary)
}

// TestFencedStepsDown: a primary whose log reports it fenced steps down and
// gives its node up, so another registry leads.
func TestFencedStepsDown(t *testing.T) {
	t.Parallel()
	srv := openServer(t)
	// a waits long after being fenced, so b (watching) is the one to
	// take the node it gives up.
	a := start(t, srv, "http://a:8081", nil, func(c *Config) { c.RetryInterval = time.Minute })
	waitfor.Until(t, limit, "a primary", a.primary)
	var bClaims atomic.Int32
	b := start(t, srv, "http://b:8081", func(context.Context) error { bClaims.Add(1); return nil })
	waitfor.Until(t, limit, "b to learn a's URL", func() bool { return b.sees("http://a:8081") })
	a.e.Fenced()
	waitfor.Until(t, limit, "b primary after a was fenced", b.primary)
	if bClaims.Load() != 1 {
		t.Fatalf("b claimed %d times, want 1", bClaims.Load())
	}
	if a.primary() {
		t.Fatal("a still primary after being fenced")
	}
	if a.releases.Load() != 1 {
		t.Fatalf("a released %d times, want 1", a.releases.Load())
	}
}

// TestOwnStaleNodeIsNoPrimary: a node holding this registry's own URL but
// another session's (its previous life's, before that session expires) is
// no primary to forward to, never this registry itself; the registry leads
// once that node goes.
func TestOwnStaleNodeIsNoPrimary(t *testing.T) {
	t.Parallel()
	if got := forwardURL(node{Version: 1, URL: "http://a:8081"}, "http://a:8081"); got != "" {
		t.Fatalf("forwardURL of the registry's own URL = %q, want none", got)
	}
	if got := forwardURL(node{Version: 1, URL: "http://b:8081"}, "http://a:8081"); got != "http://b:8081" {
		t.Fatalf("forwardURL of another registry's URL = %q, want it", got)
	}
	srv := openServer(t)
	previous, err := srv.Session()
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.EnsurePath(previous, coord.ParentPath(DefaultPath)); err != nil {
		t.Fatal(err)
	}
	if _, err := previous.Create(DefaultPath, []byte(`{"version":1,"url":"http://a:8081"}`), coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	a := start(t, srv, "http://a:8081", nil)
	previous.Close()
	waitfor.Until(t, limit, "a primary once the stale node went", a.primary)
}
