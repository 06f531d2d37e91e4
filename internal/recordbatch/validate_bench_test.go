package recordbatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/recordbatch/batchtest"
)

// BenchmarkValidateCompressed measures the produce validation of a 1 MiB
// (uncompressed) batch per codec: CRC, decompression through the walk
// window and the record walk. SetBytes is the uncompressed size. The
// decompress-only cases decode the same payload with franz-go's consumer
// decompressor into one buffer, the floor any check that decompresses
// pays.
func BenchmarkValidateCompressed(b *testing.B) {
	for _, rec := range []int{100, 1024} {
		plain := benchBatch(rec, 1<<20)
		now := time.Now()
		rules := defaultRules(now.UnixMilli())
		// benchBatch stamps records from 1 ms after the epoch: in range.
		for _, name := range []string{"none", "lz4", "zstd", "snappy", "gzip"} {
			batch := plain
			if name != "none" {
				batch = batchtest.WithPayload(plain, batchtest.CodecOf(name), HeaderAt(plain).Records, batchtest.Compress(b, name, plain[HeaderSize:]))
			}
			b.Run(fmt.Sprintf("record=%d/%s", rec, name), func(b *testing.B) {
				b.SetBytes(int64(len(plain)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := testDecoder.Validate(batch, 2<<20, rules); err != nil {
						b.Fatal(err)
					}
				}
			})
			if name == "none" {
				continue
			}
			d := kgo.DefaultDecompressor()
			b.Run(fmt.Sprintf("record=%d/%s-decompress-only", rec, name), func(b *testing.B) {
				b.SetBytes(int64(len(plain)))
				for i := 0; i < b.N; i++ {
					if _, err := d.Decompress(batch[HeaderSize:], kgo.CompressionCodecType(batchtest.CodecOf(name))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
