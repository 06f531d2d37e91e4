package tier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/store"
)

// ChunkSize is the unit the cache fetches and keeps: the aligned range
// [i*ChunkSize, (i+1)*ChunkSize) of one object (the last chunk of an object
// is shorter). A fetch far from the previous one costs one ranged GET of a
// chunk; a consumer reading a segment in order costs one GET a MiB.
const ChunkSize = 1 << 20

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Bytes bounds the chunk bytes held (the broker setting
	// millrace.remote.fetch.cache.bytes); default 256 MiB. It is raised
	// to one chunk if smaller: a read needs at least the chunk it is in.
	Bytes int64
	// FetchTimeout bounds one chunk fetch from the store; default 30 s.
	// A fetch runs on for every caller waiting for its chunk, however
	// long any one of them waits, so a store that stops answering holds
	// a fetch at most this long.
	FetchTimeout time.Duration
}

// DefaultFetchTimeout is CacheConfig.FetchTimeout when it is zero.
const DefaultFetchTimeout = 30 * time.Second

// DefaultCacheBytes is CacheConfig.Bytes when it is zero.
const DefaultCacheBytes = 256 << 20

// Validate rejects a negative size.
func (c CacheConfig) Validate() error {
	if c.Bytes < 0 {
		return fmt.Errorf("tier: millrace.remote.fetch.cache.bytes %d must not be negative (0 takes the default, %d)", c.Bytes, DefaultCacheBytes)
	}
	if c.FetchTimeout < 0 {
		return fmt.Errorf("tier: a remote fetch timeout of %v must not be negative (0 takes the default, %v)", c.FetchTimeout, DefaultFetchTimeout)
	}
	return nil
}

// Cache holds chunks of remote objects in memory, least recently used
// evicted first, within its byte bound. Concurrent misses of one chunk
// fetch it once (single flight): the first caller fetches, the others wait
// for its answer. It is safe for concurrent use; Close ends it.
type Cache struct {
	store     store.Store
	chunkSize int64 // ChunkSize; smaller in tests
	capacity  int64
	timeout   time.Duration

	// ctx is the parent of the fetches, cancelled by Close, which waits
	// for the fetch goroutines in fetches.
	ctx     context.Context
	cancel  context.CancelFunc
	fetches sync.WaitGroup

	mu       sync.Mutex                 // guards the following
	entries  map[chunkKey]*list.Element // of *chunk, in lru
	lru      *list.List                 // front: most recently used
	used     int64                      // bytes of the chunks in lru
	inflight map[chunkKey]*chunkFetch   // misses being fetched

	hits, misses, fetched, fetchErrors atomic.Int64
	fetchLatency                       prometheus.Histogram // remote fetch rate (its count) and latency
}

// chunkKey names a chunk: an object and the chunk's index in it.
type chunkKey struct {
	name  string
	index int64
}

// chunk is one cached range of an object.
type chunk struct {
	key        chunkKey
	data       []byte
	objectSize int64 // the whole object's size, learnt with the chunk
}

// chunkFetch is a miss being fetched; done closes once c or err is set.
type chunkFetch struct {
	done chan struct{}
	c    *chunk
	err  error
}

// NewCache returns a cache of st's objects. reg, when not nil, receives its
// metrics: hits, misses, bytes held and the latency of remote fetches. The
// caller closes it, and st after it.
func NewCache(st store.Store, cfg CacheConfig, reg prometheus.Registerer) (*Cache, error) {
	return newCache(st, cfg, ChunkSize, reg)
}

func newCache(st store.Store, cfg CacheConfig, chunkSize int64, reg prometheus.Registerer) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Bytes == 0 {
		cfg.Bytes = DefaultCacheBytes
	}
	if cfg.FetchTimeout == 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		store:     st,
		chunkSize: chunkSize,
		capacity:  max(cfg.Bytes, chunkSize+chunkOverhead),
		timeout:   cfg.FetchTimeout,
		ctx:       ctx,
		cancel:    cancel,
		entries:   map[chunkKey]*list.Element{},
		lru:       list.New(),
		inflight:  map[chunkKey]*chunkFetch{},
		fetchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "millrace_remote_fetch_duration_seconds", Help: "Time to fetch one chunk of a tiered segment from remote storage; the count is the remote fetch rate.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
	}
	if reg == nil {
		return c, nil
	}
	collectors := []prometheus.Collector{c.fetchLatency,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "millrace_remote_fetch_cache_hits_total", Help: "Reads of tiered segments answered from the chunk cache (millrace.remote.fetch.cache.bytes).",
		}, func() float64 { return float64(c.hits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "millrace_remote_fetch_cache_misses_total", Help: "Reads of tiered segments that needed a chunk from remote storage (joining a fetch in progress counts too).",
		}, func() float64 { return float64(c.misses.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "millrace_remote_fetch_errors_total", Help: "Chunk fetches from remote storage that failed.",
		}, func() float64 { return float64(c.fetchErrors.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "millrace_remote_fetch_cache_bytes", Help: "Bytes of tiered segment chunks held in the cache.",
		}, func() float64 { return float64(c.Stats().Bytes) }),
	}
	for _, col := range collectors {
		if err := reg.Register(col); err != nil {
			cancel()
			return nil, fmt.Errorf("tier: registering the remote fetch cache metrics: %w", err)
		}
	}
	return c, nil
}

// CacheStats is a snapshot of a cache's counters.
type CacheStats struct {
	Hits, Misses int64 // chunk reads served from memory, and not
	Fetches      int64 // chunks fetched from the store (misses share fetches)
	FetchErrors  int64
	Bytes        int64 // chunk bytes held, with chunkOverhead each
	Chunks       int   // chunks held
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Fetches: c.fetched.Load(),
		FetchErrors: c.fetchErrors.Load(), Bytes: c.used, Chunks: c.lru.Len(),
	}
}

// Object returns a reader of the named object through the cache. Its
// reads take ctx: a caller that gives up stops waiting, while a fetch it
// started goes on for the callers sharing it.
func (c *Cache) Object(ctx context.Context, name string) *CachedObject {
	return &CachedObject{c: c, ctx: ctx, name: name}
}

// CachedObject reads one object through a Cache; an io.ReaderAt.
type CachedObject struct {
	c    *Cache
	ctx  context.Context
	name string
}

// Size is the object's length, learnt with its first chunk.
func (o *CachedObject) Size() (int64, error) {
	ch, err := o.c.get(o.ctx, chunkKey{name: o.name})
	if err != nil {
		return 0, err
	}
	return ch.objectSize, nil
}

// ReadAt reads len(p) bytes at off, chunk by chunk; it returns io.EOF when
// the object ends first.
func (o *CachedObject) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("tier: reading %s at negative offset %d", o.name, off)
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		ch, err := o.c.get(o.ctx, chunkKey{name: o.name, index: at / o.c.chunkSize})
		if err != nil {
			return n, err
		}
		within := at - ch.key.index*o.c.chunkSize
		if within >= int64(len(ch.data)) {
			return n, io.EOF
		}
		n += copy(p[n:], ch.data[within:])
	}
	return n, nil
}

// get returns a chunk, from memory or fetched once for all who ask.
func (c *Cache) get(ctx context.Context, key chunkKey) (*chunk, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		c.hits.Add(1)
		return e.Value.(*chunk), nil
	}
	c.misses.Add(1)
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.c, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, errCacheClosed
	}
	f := &chunkFetch{done: make(chan struct{})}
	c.inflight[key] = f
	// The fetch serves every caller waiting for the chunk, so it runs on
	// its own goroutine, under the cache's context, not this caller's.
	c.fetches.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.fetches.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
		defer cancel()
		ch, err := c.fetch(ctx, key)
		c.mu.Lock()
		f.c, f.err = ch, err
		delete(c.inflight, key)
		if err == nil {
			c.insertLocked(ch)
		}
		c.mu.Unlock()
		close(f.done)
	}()
	select {
	case <-f.done:
		return f.c, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var errCacheClosed = errors.New("tier: the remote fetch cache is closed")

// Close stops the fetches in progress and waits for them; a read that
// needs the store after it fails.
func (c *Cache) Close() {
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.fetches.Wait()
}

// fetch reads one chunk from the store.
func (c *Cache) fetch(ctx context.Context, key chunkKey) (*chunk, error) {
	start := time.Now()
	ch, err := c.fetchChunk(ctx, key)
	c.fetchLatency.Observe(time.Since(start).Seconds())
	c.fetched.Add(1)
	if err != nil {
		c.fetchErrors.Add(1)
	}
	return ch, err
}

func (c *Cache) fetchChunk(ctx context.Context, key chunkKey) (*chunk, error) {
	r, err := c.store.Open(ctx, key.name)
	if err != nil {
		return nil, fmt.Errorf("tier: opening remote object %s: %w", key.name, err)
	}
	defer r.Close()
	size, from := r.Size(), key.index*c.chunkSize
	data := make([]byte, max(min(c.chunkSize, size-from), 0))
	if len(data) > 0 {
		n, err := r.ReadAt(data, from)
		if n < len(data) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("tier: reading remote object %s at %d: %w", key.name, from, err)
		}
	}
	return &chunk{key: key, data: data, objectSize: size}, nil
}

// chunkOverhead is what a chunk costs beyond its data (its key, list
// element and map entry, roughly): so that empty objects (a segment
// without aborted transactions has an empty .txnindex) still count.
const chunkOverhead = 128

func (ch *chunk) cost() int64 { return int64(len(ch.data)) + chunkOverhead }

// insertLocked adds a fetched chunk and evicts the least recently used
// ones beyond the bound.
func (c *Cache) insertLocked(ch *chunk) {
	if _, ok := c.entries[ch.key]; ok {
		return
	}
	c.entries[ch.key] = c.lru.PushFront(ch)
	c.used += ch.cost()
	for c.used > c.capacity {
		oldest := c.lru.Back()
		old := oldest.Value.(*chunk)
		c.lru.Remove(oldest)
		delete(c.entries, old.key)
		c.used -= old.cost()
	}
}
