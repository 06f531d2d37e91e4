package ship

import (
	"bytes"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxIdleLZ4Writers bounds the lz4 writers kept between batches: kgo
// compresses one request per broker connection at a time, so a few cover
// every broker an agent writes to at once.
const maxIdleLZ4Writers = 4

// lz4Compressor compresses produce batches as lz4 frames of 256 KiB blocks
// without a content checksum.
// kgo's own lz4 writers use the library's 4 MiB blocks, so every batch
// (at most max_batch_bytes, 1 MiB by default) took 4 MiB buffers from a
// pool that each garbage collection empties: most of the agent's
// allocation by size, and a heap that swung by tens of MiB. Kafka reads
// any lz4 frame block size.
type lz4Compressor struct {
	mu   sync.Mutex // guards the following
	idle []*lz4.Writer
}

// Compress implements kgo.Compressor. On a failure it returns nil, which
// makes kgo send the batch uncompressed.
func (c *lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	w := c.get()
	defer c.put(w)
	w.Reset(dst)
	if _, err := w.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := w.Close(); err != nil {
		return nil, kgo.CodecError
	}
	return dst.Bytes(), kgo.CodecLz4
}

func (c *lz4Compressor) get() *lz4.Writer {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		w := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return w
	}
	c.mu.Unlock()
	w := lz4.NewWriter(nil)
	// Only a block size outside the library's list fails; this one is in
	// it. The frame's content checksum is optional and left out: the batch
	// already carries a CRC-32C over the compressed records, and hashing
	// every byte again cost about a tenth of compressing them.
	_ = w.Apply(lz4.BlockSizeOption(lz4.Block256Kb), lz4.ChecksumOption(false))
	return w
}

func (c *lz4Compressor) put(w *lz4.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) < maxIdleLZ4Writers {
		c.idle = append(c.idle, w)
	}
}
