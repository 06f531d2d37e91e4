package tier

import (
	"context"
	"testing"
)

// BenchmarkReadRange reads a partition's closed segments whole, 1 MiB a
// read, locally (broker/log's Log.Read, copied to memory as a remote read
// is) and from a file:// store through the chunk cache, cold (a new cache
// each time: every chunk fetched) and warm: the issue's "remote read
// throughput against a local read of the same range".
func BenchmarkReadRange(b *testing.B) {
	tl := newTieredLogSized(b, "clicks", 0, 3000, 1000, 1<<20, 4096)
	end := tl.segments[len(tl.segments)-1].LastOffset + 1
	var size int64
	for _, s := range tl.segments {
		size += s.Size
	}
	const readBytes = 1 << 20
	walk := func(b *testing.B, read func(offset int64) Batches) {
		for offset := int64(0); offset < end; {
			batches := read(offset)
			if batches.NextOffset <= offset {
				b.Fatalf("no progress at %d", offset)
			}
			offset = batches.NextOffset
		}
	}
	b.Run("local", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			walk(b, func(offset int64) Batches { return tl.localRead(b, offset, readBytes, end) })
		}
	})
	remote := func(b *testing.B, c *Cache) func(int64) Batches {
		r := NewRemoteReader(tl.index, c)
		return func(offset int64) Batches {
			batches, err := r.Read(context.Background(), ReadRequest{Topic: "clicks", Offset: offset, MaxBytes: readBytes, MaxOffset: end})
			if err != nil {
				b.Fatal(err)
			}
			return batches
		}
	}
	b.Run("remote-cold", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			c, err := NewCache(tl.store, CacheConfig{Bytes: 4 * size}, nil)
			if err != nil {
				b.Fatal(err)
			}
			walk(b, remote(b, c))
			c.Close()
		}
	})
	b.Run("remote-warm", func(b *testing.B) {
		c, err := NewCache(tl.store, CacheConfig{Bytes: 4 * size}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		read := remote(b, c)
		walk(b, read)
		b.SetBytes(size)
		for b.Loop() {
			walk(b, read)
		}
	})
}
