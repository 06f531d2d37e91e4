package log

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

func TestProducerSnapshotRoundTrip(t *testing.T) {
	s := producerSnapshot{offset: 1234, producers: map[int64]*producerEntry{
		7:             {epoch: 3, lastTimestamp: 99, batches: []producerBatch{{0, 4, 10, 14}, {5, 5, 20, 20}}},
		math.MaxInt64: {epoch: math.MaxInt16, lastTimestamp: -1, batches: []producerBatch{{math.MaxInt32 - 1, 0, 1, 2}}},
	}}
	got, err := decodeProducerSnapshot(encodeProducerSnapshot(s))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %+v, want %+v", got, s)
	}
	b := encodeProducerSnapshot(s)
	b[len(b)-1] ^= 1
	if _, err := decodeProducerSnapshot(b); err == nil {
		t.Fatal("a corrupt snapshot decoded")
	}
}

// TestProducerSnapshotFormat decodes a snapshot as the broker wrote it when
// producer state lived in the Kafka layer (version 1), so a broker upgraded
// in place keeps its state, and checks that the same state encodes to the
// version 2 bytes (the same plus no transaction, no coordinator epoch).
func TestProducerSnapshotFormat(t *testing.T) {
	const v1 = "4d52505300014929c261000000000000002a00000001000000000000000700030000019b76daa800020000000000000004000000000000001e0000000000000022000000050000000500000000000000280000000000000028"
	const written = "4d5250530002c896729d000000000000002a00000001000000000000000700030000019b76daa800ffffffffffffffffffffffff020000000000000004000000000000001e0000000000000022000000050000000500000000000000280000000000000028"
	b, err := hex.DecodeString(written)
	if err != nil {
		t.Fatal(err)
	}
	want := producerSnapshot{offset: 42, producers: map[int64]*producerEntry{
		7: {epoch: 3, lastTimestamp: 1767225600000, batches: []producerBatch{{0, 4, 30, 34}, {5, 5, 40, 40}}},
	}}
	got, err := decodeProducerSnapshot(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, want)
	}
	old, err := hex.DecodeString(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeProducerSnapshot(old); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded version 1 %+v, %v; want %+v", got, err, want)
	}
	if again := hex.EncodeToString(encodeProducerSnapshot(want)); again != written {
		t.Fatalf("encoded\n%s\nwant\n%s", again, written)
	}
	if producerSnapshotFile != "producer-state.snapshot" {
		t.Fatalf("snapshot file renamed to %q", producerSnapshotFile)
	}
}

// FuzzProducerSnapshot: decoding never panics, and what decodes re-encodes
// to something that decodes the same.
func FuzzProducerSnapshot(f *testing.F) {
	f.Add(encodeProducerSnapshot(producerSnapshot{offset: 5, producers: map[int64]*producerEntry{1: {epoch: 0, batches: []producerBatch{{0, 1, 0, 1}}}}}))
	f.Add([]byte("MRPS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeProducerSnapshot(b)
		if err != nil {
			return
		}
		again, err := decodeProducerSnapshot(encodeProducerSnapshot(s))
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encoding changed the snapshot: %v", err)
		}
	})
}

// TestProducerStateRules checks the sequence rules on the state alone.
func TestProducerStateRules(t *testing.T) {
	ps := &producerState{producers: map[int64]*producerEntry{}, loaded: true, now: time.Now}
	h := func(epoch int16, seq int32, records int32, base int64) BatchHeader {
		return BatchHeader{ProducerID: 1, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: records - 1, Records: records, BaseOffset: base}
	}
	// Six batches: only the last five are remembered.
	for i := range int32(6) {
		b := h(0, i*2, 2, int64(i*2))
		if dup, err := ps.checkLocked(b); dup != nil || err != nil {
			t.Fatalf("batch %d: dup %v err %v", i, dup, err)
		}
		ps.applyLocked(b)
	}
	if dup, _ := ps.checkLocked(h(0, 2, 2, 0)); dup == nil || dup.firstOffset != 2 {
		t.Fatalf("second batch not a duplicate: %+v", dup)
	}
	if _, err := ps.checkLocked(h(0, 0, 2, 0)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("first batch (forgotten): %v, want ErrOutOfOrderSequence", err)
	}
	if _, err := ps.checkLocked(h(0, 12, 1, 0)); err != nil {
		t.Fatalf("next sequence: %v", err)
	}
	if _, err := ps.checkLocked(h(-1, 12, 1, 0)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("idempotent batch without an epoch: %v, want ErrInvalidRecord", err)
	}
	ps.applyLocked(h(2, 0, 1, 12))
	if _, err := ps.checkLocked(h(1, 1, 1, 0)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if _, err := ps.checkLocked(h(3, 5, 1, 0)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("newer epoch not at sequence 0: %v, want ErrOutOfOrderSequence", err)
	}
	wrap := BatchHeader{BaseSequence: math.MaxInt32 - 1, LastOffsetDelta: 3}
	if got := lastSequence(wrap); got != 1 {
		t.Fatalf("lastSequence across the wrap = %d, want 1", got)
	}
}

// idempotentBatch is batchtest.Make with producer fields, as an idempotent
// producer sends it.
func idempotentBatch(producer int64, epoch int16, sequence int32, records int) []byte {
	b := batchtest.Make(records, 8, time.Now().UnixMilli(), byte(sequence))
	be := binary.BigEndian
	be.PutUint64(b[offProducerID:], uint64(producer))
	be.PutUint16(b[offProducerEpoch:], uint16(epoch))
	be.PutUint32(b[offBaseSequence:], uint32(sequence))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// appendProduced appends a batch as the Produce handler does.
func appendProduced(t *testing.T, l *Log, batch []byte) (AppendInfo, error) {
	t.Helper()
	v, err := l.ValidateProduce(append([]byte(nil), batch...), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return l.AppendValidated(v, 0)
}

// TestProducerStateSnapshotAndTruncation writes a periodic snapshot, then
// truncates the log below it: the rebuilt state forgets the removed batch.
func TestProducerStateSnapshotAndTruncation(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	const pid = 5
	second := idempotentBatch(pid, 0, 1, 1)
	for i, b := range [][]byte{idempotentBatch(pid, 0, 0, 1), second} {
		if info, err := appendProduced(t, l, b); err != nil || info.Duplicate || info.FirstOffset != int64(i) {
			t.Fatalf("append %d: %+v, %v", i, info, err)
		}
	}
	if info, err := appendProduced(t, l, second); err != nil || !info.Duplicate || info.FirstOffset != 1 || l.EndOffset() != 2 {
		t.Fatalf("retry: %+v, %v, end %d", info, err, l.EndOffset())
	}

	l.maintainProducers()
	snap, err := readProducerSnapshot(l.Dir())
	if err != nil || snap == nil || snap.offset != 2 || len(snap.producers[pid].batches) != 2 {
		t.Fatalf("periodic snapshot: %+v, %v", snap, err)
	}

	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	// The second batch is gone from the log, so it is no duplicate now.
	if info, err := appendProduced(t, l, second); err != nil || info.Duplicate || info.FirstOffset != 1 || l.EndOffset() != 2 {
		t.Fatalf("after truncation: %+v, %v, end %d", info, err, l.EndOffset())
	}
	if _, err := appendProduced(t, l, idempotentBatch(pid, 0, 5, 1)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap after truncation: %v, want ErrOutOfOrderSequence", err)
	}
}

// TestProducerStateAcrossReopen: the state survives a clean close (snapshot)
// and a lost snapshot (rebuilt from the log), and a replicated append is
// recorded like a produced one.
func TestProducerStateAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	if _, err := appendProduced(t, l, idempotentBatch(9, 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	replicated := idempotentBatch(9, 0, 2, 1)
	binary.BigEndian.PutUint64(replicated[offBaseOffset:], 2)
	if _, err := l.AppendReplicated(replicated); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(dir, producerSnapshotFile)
	for _, lose := range []bool{false, true} {
		if lose {
			if err := os.Remove(snapshot); err != nil {
				t.Fatal(err)
			}
		}
		l := openTest(t, dir, DefaultConfig(), options{})
		producers, err := l.Producers()
		if err != nil || len(producers) != 1 || producers[0].ID != 9 || producers[0].LastSequence != 2 {
			t.Fatalf("snapshot lost %v: producers %+v, %v", lose, producers, err)
		}
		if info, err := appendProduced(t, l, replicated); err != nil || !info.Duplicate || info.FirstOffset != 2 {
			t.Fatalf("snapshot lost %v: retry %+v, %v", lose, info, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProducerSnapshotAfterTruncationAndCrash: a truncation below the
// snapshot, appends past the snapshot's offset, then a crash (no Close).
// The reopened log must not take the old snapshot, which still holds the
// truncated batch, for the state of the batches below its offset.
func TestProducerSnapshotAfterTruncationAndCrash(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	const truncated, other = 5, 6
	for seq := range int32(2) {
		if _, err := appendProduced(t, l, idempotentBatch(truncated, 0, seq, 1)); err != nil {
			t.Fatal(err)
		}
	}
	l.maintainProducers()
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	for seq := range int32(2) {
		if _, err := appendProduced(t, l, idempotentBatch(other, 0, seq, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, dir, crashed)
	reopened := openTest(t, crashed, DefaultConfig(), options{})
	defer reopened.Close()
	producers, err := reopened.Producers()
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerInfo{{ID: truncated, LastSequence: 0}, {ID: other, LastSequence: 1}}
	if len(producers) != len(want) {
		t.Fatalf("producers %+v, want %+v", producers, want)
	}
	for i, p := range producers {
		if p.ID != want[i].ID || p.LastSequence != want[i].LastSequence {
			t.Fatalf("producer %d: %+v, want %+v", i, p, want[i])
		}
	}
}
