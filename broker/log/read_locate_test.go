package log

import (
	"fmt"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// Read's result, for every offset and a range of byte and offset limits,
// is what a walk over the batches gives: batches of mixed sizes (some below
// the index interval, some above, one above the window) so that reads end
// through the offset index, through the header window, and both.
func TestReadLimitsAgainstBatchWalk(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 512
	l := openTest(t, t.TempDir(), cfg, options{})
	defer l.Close()
	type span struct {
		base, last, pos, size int64
	}
	var spans []span
	var pos int64
	sizes := []int{1, 3, 40, 2, 1, 90, 5, 1, 1, 1, 60, 2}
	for i := range 60 {
		n := sizes[i%len(sizes)]
		info := mustAppend(t, l, batchtest.Make(n, 50+i%3*20, int64(i), byte(i)))
		size := int64(0)
		for _, h := range info.Batches {
			size += int64(h.Size())
		}
		spans = append(spans, span{base: info.FirstOffset, last: info.LastOffset, pos: pos, size: size})
		pos += size
	}
	end := l.EndOffset()
	for off := int64(0); off < end; off += 3 {
		for _, maxBytes := range []int{1, 200, 700, 1500, 5000, 20000, 1 << 20} {
			for _, maxOffset := range []int64{off, off + 1, off + 50, off + 300, end} {
				t.Run(fmt.Sprintf("off=%d/bytes=%d/maxoff=%d", off, maxBytes, maxOffset), func(t *testing.T) {
					// The walk: the batch holding off, then whole batches
					// while they fit the bytes and end below maxOffset.
					first := 0
					for spans[first].last < off {
						first++
					}
					wantFirst, wantNext, wantLen := off, off, int64(0)
					if spans[first].last < maxOffset {
						wantFirst, wantNext, wantLen = spans[first].base, spans[first].last+1, spans[first].size
						for j := first + 1; j < len(spans) && spans[j].last < maxOffset && wantLen+spans[j].size <= int64(maxBytes); j++ {
							wantNext, wantLen = spans[j].last+1, wantLen+spans[j].size
						}
					}
					s, err := l.Read(off, maxBytes, maxOffset)
					if err != nil {
						t.Fatal(err)
					}
					defer s.Close()
					if int64(s.Len()) != wantLen || s.NextOffset() != wantNext || (wantLen > 0 && s.FirstOffset() != wantFirst) {
						t.Fatalf("read: len %d first %d next %d; want len %d first %d next %d", s.Len(), s.FirstOffset(), s.NextOffset(), wantLen, wantFirst, wantNext)
					}
					if wantLen > 0 {
						b, err := s.ReadAll()
						if err != nil {
							t.Fatal(err)
						}
						hs, err := testDecoder.Validate(b, maxInt, storedRules)
						if err != nil || hs[0].BaseOffset != wantFirst {
							t.Fatalf("returned bytes: %v, first base %d", err, hs[0].BaseOffset)
						}
					}
				})
			}
		}
	}
}
