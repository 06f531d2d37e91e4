package kafka

import (
	"bytes"
	"fmt"
	"testing"
)

// A pooled buffer is never shorter than the frame, and a buffer is
// recycled into the class it serves whole. Other tests share the pool and
// it drops buffers when full, so a miss is allowed; a wrong size is not,
// nor holding more than framePoolMaxBytes.
func TestFrameBufferClasses(t *testing.T) {
	for _, size := range []int{1, 100, frameClassMin - 1, frameClassMin, frameClassMin + 1, 16 << 10, 1<<20 - 7, 1 << 20, 1<<20 + 1, 5 << 20, 64 << 20} {
		c := frameCapacity(size)
		if c < size || (size > frameClassMin && c&(c-1) != 0) || c > 2*size && size > frameClassMin {
			t.Fatalf("frameCapacity(%d) = %d", size, c)
		}
		recycleFrame(make([]byte, size, c))
		for _, want := range []int{size, size / 2, size - 1} {
			if want <= 0 {
				continue
			}
			if b := frameBuffer(want); b != nil && (len(b) != want || cap(b) < want) {
				t.Fatalf("frameBuffer(%d) after recycling a %d-byte buffer: len %d cap %d", want, c, len(b), cap(b))
			}
		}
	}
	for range 100 {
		recycleFrame(make([]byte, 0, 1<<20))
	}
	frameBuffers.mu.Lock()
	held := frameBuffers.bytes
	frameBuffers.mu.Unlock()
	if held > framePoolMaxBytes {
		t.Fatalf("the pool holds %d bytes, more than %d", held, framePoolMaxBytes)
	}
	if b := frameBuffer(64<<20 + 1); b != nil {
		t.Fatalf("a frame above the largest class got a pooled buffer of %d bytes", cap(b))
	}
}

// Produce frames are recycled once answered. Requests of many sizes to two
// topics from idempotent producers on one connection, so that buffers are
// reused across topics: every record is stored as sent, and each
// partition's producer state holds the producer's last sequence there.
func TestProduceFramesRecycled(t *testing.T) {
	tb := startBroker(t)
	topics := []string{"recycled-alpha", "recycled-beta"}
	for _, topic := range topics {
		tb.createTopic(topic, 1, nil)
	}
	c := dial(t, tb.addr)
	pid := c.initProducerID(4, -1, -1, 1).ProducerID
	seq := map[string]int32{}
	want := map[string][][]byte{}
	corr := int32(10)
	for i := range 40 {
		topic := topics[i%2]
		// The first requests are alike in size, so they share a buffer;
		// later ones vary, so buffers move between classes.
		values := []string{fmt.Sprintf("%s %d %s", topic, i, bytes.Repeat([]byte{'a' + byte(i%26)}, 5000+i*37))}
		if i >= 10 {
			values = make([]string, 1+i%5)
			for j := range values {
				values[j] = fmt.Sprintf("%s %d %d %s", topic, i, j, bytes.Repeat([]byte{'a' + byte(i%26)}, (i*997)%9000))
			}
		}
		batch := makeBatch(t, idempotentBatch(pid, 0, seq[topic], values...))
		want[topic] = append(want[topic], append([]byte(nil), batch...))
		corr++
		rp := c.produceRaw(9, topic, 0, -1, batch, corr)
		if rp.ErrorCode != 0 {
			t.Fatalf("produce %d to %s: error %d", i, topic, rp.ErrorCode)
		}
		seq[topic] += int32(len(values))
	}
	for _, topic := range topics {
		stored := readAll(t, tb.partitionLog(topic, 0))
		pos := 0
		for i, sent := range want[topic] {
			got := stored[pos : pos+len(sent)]
			if !bytes.Equal(got[16:], sent[16:]) {
				t.Fatalf("%s batch %d was not stored as sent", topic, i)
			}
			pos += len(sent)
		}
		if pos != len(stored) {
			t.Fatalf("%s holds %d bytes, sent %d", topic, len(stored), pos)
		}
	}
	for _, topic := range topics {
		producers, err := tb.partitionLog(topic, 0).Producers()
		if err != nil || len(producers) != 1 || producers[0].ID != pid || producers[0].LastSequence != seq[topic]-1 {
			t.Fatalf("producer state of %s: %+v, %v; want producer %d at sequence %d", topic, producers, err, pid, seq[topic]-1)
		}
	}
}
