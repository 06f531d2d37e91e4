package tier

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/internal/waitfor"
	"millrace/store"
	"millrace/store/storetest"
)

const testChunk = 16

func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// Reads across chunk boundaries return the object's bytes; each chunk is
// fetched once, and read again from memory.
func TestCacheReadsAcrossChunks(t *testing.T) {
	t.Parallel()
	st := storetest.NewGated(t)
	data := testData(50) // chunks of 16, 16, 16 and 2
	storetest.Put(t, st, "a.log", data)
	c := newTestCache(t, st, CacheConfig{Bytes: 1 << 20}, prometheus.NewRegistry())
	o := c.Object(context.Background(), "a.log")
	if n, err := o.Size(); n != 50 || err != nil {
		t.Fatalf("Size = %d, %v; want 50", n, err)
	}
	for _, tc := range []struct{ off, n int }{{0, 50}, {10, 20}, {15, 2}, {48, 2}, {32, 16}} {
		got := make([]byte, tc.n)
		if n, err := o.ReadAt(got, int64(tc.off)); n != tc.n || err != nil || !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
			t.Errorf("ReadAt(%d, %d) = %d, %v, %x", tc.off, tc.n, n, err, got)
		}
	}
	if n, err := o.ReadAt(make([]byte, 4), 48); n != 2 || err == nil {
		t.Errorf("ReadAt past the end = %d, %v; want 2 and io.EOF", n, err)
	}
	s := c.Stats()
	if s.Fetches != 4 || st.Opens("a.log") != 4 || s.Chunks != 4 {
		t.Errorf("stats %+v, opens %d; want 4 chunks fetched once each", s, st.Opens("a.log"))
	}
	if s.Hits == 0 {
		t.Errorf("stats %+v: no hits", s)
	}
}

// The cache keeps what fits its bound and evicts the least recently used
// chunk first.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	st := storetest.NewGated(t)
	storetest.Put(t, st, "a.log", testData(4*testChunk))
	c := newTestCache(t, st, CacheConfig{Bytes: 2 * (testChunk + chunkOverhead)}, nil)
	o := c.Object(context.Background(), "a.log")
	read := func(chunk int) {
		t.Helper()
		if _, err := o.ReadAt(make([]byte, 1), int64(chunk*testChunk)); err != nil {
			t.Fatal(err)
		}
	}
	read(0)
	read(1)
	read(0) // 1 is now the least recently used
	read(2) // evicts 1
	if s := c.Stats(); s.Chunks != 2 || s.Bytes > 2*(testChunk+chunkOverhead) || s.Fetches != 3 {
		t.Fatalf("stats %+v; want 2 chunks held after 3 fetches", s)
	}
	read(0) // still held
	if s := c.Stats(); s.Fetches != 3 {
		t.Errorf("chunk 0 was evicted: %+v", s)
	}
	read(1) // fetched again
	if s := c.Stats(); s.Fetches != 4 || s.Chunks != 2 {
		t.Errorf("chunk 1 was kept: %+v", s)
	}
}

// Concurrent misses of one chunk fetch it once; a caller that gives up
// stops waiting, and the fetch still fills the cache.
func TestCacheSingleFlight(t *testing.T) {
	t.Parallel()
	st := storetest.NewGated(t)
	data := testData(testChunk)
	storetest.Put(t, st, "a.log", data)
	c := newTestCache(t, st, CacheConfig{}, nil)
	release := st.Hold()
	defer release()
	const readers = 4
	var wg sync.WaitGroup
	results := make([][]byte, readers)
	for i := range readers {
		wg.Go(func() {
			b := make([]byte, testChunk)
			if _, err := c.Object(context.Background(), "a.log").ReadAt(b, 0); err == nil {
				results[i] = b
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	impatient := make(chan error, 1)
	go func() {
		_, err := c.Object(ctx, "a.log").ReadAt(make([]byte, 1), 0)
		impatient <- err
	}()
	waitfor.Until(t, 10*time.Second, "every reader to miss", func() bool { return c.Stats().Misses == readers+1 })
	cancel()
	if err := <-impatient; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled reader got %v; want context.Canceled", err)
	}
	release()
	wg.Wait()
	for i, b := range results {
		if !bytes.Equal(b, data) {
			t.Errorf("reader %d got %x", i, b)
		}
	}
	if n := st.Opens("a.log"); n != 1 {
		t.Errorf("%d fetches of one chunk; want 1", n)
	}
}

// A failed fetch is not cached: the next read tries again.
func TestCacheDoesNotKeepFailures(t *testing.T) {
	t.Parallel()
	st := storetest.NewGated(t)
	c := newTestCache(t, st, CacheConfig{}, nil)
	if _, err := c.Object(context.Background(), "a.log").Size(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing object: %v; want store.ErrNotFound", err)
	}
	storetest.Put(t, st, "a.log", testData(3))
	if n, err := c.Object(context.Background(), "a.log").Size(); n != 3 || err != nil {
		t.Fatalf("Size = %d, %v after the object appeared", n, err)
	}
	if s := c.Stats(); s.FetchErrors != 1 || s.Fetches != 2 {
		t.Errorf("stats %+v; want one failed and one good fetch", s)
	}
	if err := (CacheConfig{Bytes: -1}).Validate(); err == nil {
		t.Error("a negative cache size was accepted")
	}
}

func newTestCache(t *testing.T, st store.Store, cfg CacheConfig, reg prometheus.Registerer) *Cache {
	t.Helper()
	c, err := newCache(st, cfg, testChunk, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
