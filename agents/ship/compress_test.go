package ship

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLZ4CompressorRoundTrip compresses batches larger and smaller than a
// block with reused writers and reads them back as lz4 frames.
func TestLZ4CompressorRoundTrip(t *testing.T) {
	c := &lz4Compressor{}
	for i, size := range []int{10, 300 << 10, 1 << 20, 5000} {
		var src []byte
		for n := 0; len(src) < size; n++ {
			src = fmt.Appendf(src, "batch %d line %d status=200 path=/api/v1/items/%d\n", i, n, n%977)
		}
		src = src[:size]
		out, codec := c.Compress(new(bytes.Buffer), src)
		if codec != kgo.CodecLz4 {
			t.Fatalf("size %d: codec %v, want lz4", size, codec)
		}
		// The frame descriptor's flag byte follows the 4-byte magic;
		// bit 2 announces a content checksum.
		if len(out) < 5 || out[4]&0x04 != 0 {
			t.Fatalf("size %d: frame flags %08b, want no content checksum", size, out[4])
		}
		back, err := io.ReadAll(lz4.NewReader(bytes.NewReader(out)))
		if err != nil {
			t.Fatalf("size %d: reading the frame: %v", size, err)
		}
		if !bytes.Equal(back, src) {
			t.Fatalf("size %d: round trip changed the data (%d bytes back)", size, len(back))
		}
	}
	if n := len(c.idle); n != 1 {
		t.Fatalf("%d idle writers after serial use, want 1", n)
	}
}
