package store

import (
	"context"
	"io"
)

// Pacer holds an upload's bytes to a rate: Wait blocks until n more bytes
// may go, or until ctx ends. broker/log's Throttle is one.
type Pacer interface {
	Wait(ctx context.Context, n int) error
}

type pacerKey struct{}

// WithPacer returns ctx carrying p. An object created with it sends its
// bytes through p where they leave for the store, at most pacedChunk at a
// time: the file store as the object is written, the S3 store as it
// sends the object (writing its local spool is not paced). Tiered
// storage's copy quota paces uploads this way, so that a segment's
// upload is spread out rather than sent, and taken in by the store, in
// one burst.
func WithPacer(ctx context.Context, p Pacer) context.Context {
	return context.WithValue(ctx, pacerKey{}, p)
}

// pacerOf is the Pacer ctx carries, nil if none.
func pacerOf(ctx context.Context) Pacer {
	p, _ := ctx.Value(pacerKey{}).(Pacer)
	return p
}

// pacedChunk is the most a paced object sends at a time.
const pacedChunk = 64 << 10

// pacedSection reads a section of an object's spool for an upload, each
// piece when the pacer lets it go. It seeks, so the S3 client can rewind
// it to retry a request.
type pacedSection struct {
	ctx context.Context
	r   *io.SectionReader
	p   Pacer
}

func (s pacedSection) Read(b []byte) (int, error) {
	if len(b) > pacedChunk {
		b = b[:pacedChunk]
	}
	n, err := s.r.Read(b)
	if werr := s.p.Wait(s.ctx, n); werr != nil && err == nil {
		err = werr
	}
	return n, err
}

func (s pacedSection) Seek(offset int64, whence int) (int64, error) {
	return s.r.Seek(offset, whence)
}

// uploadBody returns the section of spool an upload sends: paced when the
// object was created with a Pacer.
func uploadBody(ctx context.Context, p Pacer, spool io.ReaderAt, off, n int64) io.Reader {
	r := io.NewSectionReader(spool, off, n)
	if p == nil {
		return r
	}
	return pacedSection{ctx: ctx, r: r, p: p}
}
