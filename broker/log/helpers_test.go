package log

import (
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"millrace/internal/recordbatch"
)

// testRecord is one record for makeBatch.
type testRecord struct {
	key, value []byte
	tsDelta    int64
}

// makeBatch builds a valid, uncompressed v2 batch of n records with values
// of valueSize bytes (value bytes derived from seed) and the given first
// timestamp; records i has timestamp firstTs+i.
func makeBatch(n, valueSize int, firstTs int64, seed byte) []byte {
	recs := make([]testRecord, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = seed + byte(i) + byte(j)
		}
		recs[i] = testRecord{value: v, tsDelta: int64(i)}
	}
	return buildBatch(recs, firstTs, 0)
}

// buildBatch encodes records into a v2 batch with the given attributes.
func buildBatch(recs []testRecord, firstTs int64, attributes int16) []byte {
	var body []byte
	maxTs := firstTs
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.tsDelta)
		rec = binary.AppendVarint(rec, int64(i))
		if r.key == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.key)))
			rec = append(rec, r.key...)
		}
		rec = binary.AppendVarint(rec, int64(len(r.value)))
		rec = append(rec, r.value...)
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
		maxTs = max(maxTs, firstTs+r.tsDelta)
	}
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(body))
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], 0)
	be.PutUint32(b[offLength:], uint32(batchHeaderSize-batchLengthOverhead+len(body)))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = batchMagic
	be.PutUint16(b[offAttributes:], uint16(attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[offFirstTimestamp:], uint64(firstTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], ^uint64(0))
	be.PutUint16(b[offProducerEpoch:], 0xffff)
	be.PutUint32(b[offBaseSequence:], 0xffffffff)
	be.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// fakeClock is an injectable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func openTest(t testing.TB, dir string, cfg Config, opts options) *Log {
	t.Helper()
	l, err := openLog(dir, cfg, testLogger(t), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, batch []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(append([]byte(nil), batch...), 1)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

// readAllBatches reads the log from start to end and returns the batches.
func readAllBatches(t testing.TB, l *Log, from int64) []BatchHeader {
	t.Helper()
	var out []BatchHeader
	for off := from; off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatalf("read all %d: %v", off, err)
		}
		hs, err := testDecoder.Validate(b, maxInt, storedRules)
		if err != nil {
			t.Fatalf("read at %d returned invalid batches: %v", off, err)
		}
		out = append(out, hs...)
		if s.NextOffset() <= off {
			t.Fatalf("read at %d made no progress", off)
		}
		off = s.NextOffset()
	}
	return out
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testDecoder decodes what the tests validate outside a log.
var testDecoder = recordbatch.NewDecoder(0)

// walkWindow is the size recordbatch decodes a compressed batch through
// (its walkWindow): records larger than it take the walk's other path.
const walkWindow = 64 << 10
