package tail

import (
	"bytes"
	"testing"
)

// TestValueChunkFreeOnlyAfterEveryValue: a chunk of values is reused only
// once every value in it was released and the loop moved on to another
// chunk; until then the values keep their bytes.
func TestValueChunkFreeOnlyAfterEveryValue(t *testing.T) {
	tl := &Tailer{}
	type held struct {
		value []byte
		chunk *valueChunk
		fill  byte
	}
	var first []held
	v, c := tl.valueSpace(100)
	for i, c0 := 0, c; c == c0 && i < chunkSize; i++ {
		fill := byte(i)
		for j := range v {
			v[j] = fill
		}
		first = append(first, held{v, c, fill})
		v, c = tl.valueSpace(100)
	}
	if c == first[0].chunk {
		t.Fatal("a full chunk was not replaced")
	}
	if len(first) != chunkSize/100 {
		t.Fatalf("%d values of 100 bytes in a %d-byte chunk", len(first), chunkSize)
	}
	for _, h := range first[1:] {
		h.chunk.unref()
	}
	if got := tl.chunks.get(); got != nil {
		t.Fatal("a chunk came free while one of its values was still held")
	}
	if h := first[0]; !bytes.Equal(h.value, bytes.Repeat([]byte{h.fill}, 100)) {
		t.Fatal("a held value changed")
	}
	first[0].chunk.unref()
	if got := tl.chunks.get(); got != first[0].chunk {
		t.Fatal("a chunk with every value released was not kept for reuse")
	}
	if v, c := tl.valueSpace(maxChunkedValue + 1); c != nil || len(v) != maxChunkedValue+1 {
		t.Fatalf("a long value went into a chunk (%v) or has %d bytes", c != nil, len(v))
	}
}

func TestRecyclerHandsBackWhatWasPut(t *testing.T) {
	var r recycler[lineRecord]
	if r.get() != nil {
		t.Fatal("an empty recycler returned something")
	}
	a, b := &lineRecord{}, &lineRecord{}
	r.put(a)
	r.put(b)
	got := map[*lineRecord]bool{r.get(): true, r.get(): true}
	if !got[a] || !got[b] || r.get() != nil {
		t.Fatal("the recycler did not return exactly what was put")
	}
	r.put(a)
	r.drop()
	if r.get() != nil {
		t.Fatal("dropped objects came back")
	}
}
