package tier

import (
	"github.com/prometheus/client_golang/prometheus"

	"millrace/store"
)

// ReadConfig configures the read side of tiered storage.
type ReadConfig struct {
	// Cache is the chunk cache (millrace.remote.fetch.cache.bytes).
	Cache CacheConfig
	// Pool is the reader pool (remote.log.reader.threads,
	// remote.log.reader.max.pending.tasks, remote.fetch.max.wait.ms).
	Pool ReadPoolConfig
}

// ReadSide is what a broker opens to serve fetches below the local log
// start: the cache over the store, the reader over the remote index, and
// the pool the Fetch handler submits to (broker/kafka's Deps.RemoteIndex
// and Deps.RemoteReads take index and Pool).
type ReadSide struct {
	Cache  *Cache
	Reader *RemoteReader
	Pool   *ReadPool
}

// OpenReadSide opens the read side over st and index; reg, when not nil,
// receives the metrics of the cache and the pool. The caller closes it
// after the broker that uses it, and st after that.
func OpenReadSide(st store.Store, index RemoteIndex, cfg ReadConfig, reg prometheus.Registerer) (*ReadSide, error) {
	cache, err := NewCache(st, cfg.Cache, reg)
	if err != nil {
		return nil, err
	}
	reader := NewRemoteReader(index, cache)
	pool, err := NewReadPool(reader, cfg.Pool, reg)
	if err != nil {
		cache.Close()
		return nil, err
	}
	return &ReadSide{Cache: cache, Reader: reader, Pool: pool}, nil
}

// Close stops the pool, then the cache's fetches.
func (r *ReadSide) Close() {
	r.Pool.Close()
	r.Cache.Close()
}
