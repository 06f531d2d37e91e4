package tier

import (
	"context"
	"io"
	"testing"

	"millrace/internal/s3test"
	"millrace/store"
)

// BenchmarkReadRange reads a partition's closed segments whole, 1 MiB a
// read, locally (broker/log's Log.Read, copied to memory as a remote read
// is) and from a file:// store through the chunk cache, cold (a new cache
// each time: every chunk fetched) and warm, and cold from an S3 server
// (versitygw on loopback) holding the same objects: the issue's "remote
// read throughput against a local read of the same range". Every case
// reads the same offsets, 0 to the end, of the same segment files.
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
	cold := func(st store.Store) func(b *testing.B) {
		return func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				c, err := NewCache(st, CacheConfig{Bytes: 4 * size}, nil)
				if err != nil {
					b.Fatal(err)
				}
				walk(b, remote(b, c))
				c.Close()
			}
		}
	}
	b.Run("remote-cold", cold(tl.store))
	b.Run("remote-cold-s3", func(b *testing.B) {
		cold(copyToS3(b, tl))(b)
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

// copyToS3 starts an S3 server and copies tl's segment objects into a
// bucket of it, under the same names.
func copyToS3(b *testing.B, tl *tieredLog) store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := store.NewS3(ctx, store.S3Config{Endpoint: s3test.StartBucket(b, "tier"), Bucket: "tier", AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	for _, seg := range tl.segments {
		for _, suffix := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
			r, err := tl.store.Open(ctx, seg.Key+suffix)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				b.Fatal(err)
			}
			obj, err := st.Create(ctx, seg.Key+suffix)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := obj.Write(data); err != nil {
				b.Fatal(err)
			}
			if err := obj.Publish(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	return st
}
