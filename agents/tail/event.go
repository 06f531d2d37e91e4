package tail

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"millrace/schemas"
)

// newFileID returns a fresh random file identity. It is random rather than
// derived from device, inode and content because a truncated file keeps its
// inode and may get the same first bytes again, yet its lines are new and
// must not share event ids with the old ones. It is persisted before any
// line of the file is shipped, so a restart reuses it.
func newFileID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// eventIDPrefix is the first half of the event ids of file id's lines: 16
// hex characters of SHA-256(id), computed once per file.
func eventIDPrefix(fileID string) [16]byte {
	sum := sha256.Sum256([]byte(fileID))
	var p [16]byte
	hex.Encode(p[:], sum[:8])
	return p
}

// eventID is the stable id of the line starting at offset in the file
// whose prefix is given: 32 hex characters, the prefix then the offset as
// 16 hex digits. The same file and offset give the same id across re-reads
// and restarts (the file identity is persisted), and no two lines of one
// file share an offset. It replaced SHA-256 of identity and offset per
// line, which cost the tailer's loop about a tenth of its time.
func eventID(dst []byte, prefix *[16]byte, offset int64) []byte {
	dst = append(dst, prefix[:]...)
	var o [8]byte
	binary.BigEndian.PutUint64(o[:], uint64(offset))
	return hex.AppendEncode(dst, o[:])
}

// fingerprint hashes the first n bytes of f. It returns the hash of fewer
// bytes (and their count) when the file is shorter.
func fingerprint(f *os.File, n int) (int, string, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return 0, "", err
	}
	return got, hashHex(buf[:got]), nil
}

// hashHex is the fingerprint of b: 32 hex characters of SHA-256.
func hashHex(b []byte) string {
	var sum [32]byte
	hashInto(&sum, b)
	return string(sum[:])
}

// hashInto writes the fingerprint of b into dst without allocating.
func hashInto(dst *[32]byte, b []byte) {
	sum := sha256.Sum256(b)
	hex.Encode(dst[:], sum[:16])
}

// lineEvent is one line (or multiline event) ready to encode.
type lineEvent struct {
	offset    int64
	line      []byte
	truncated bool
}

// encoder builds the log-line JSON of /tmp/events.md by hand: the hot path
// of the tailer, where encoding/json's reflection would dominate.
type encoder struct {
	host   []byte // JSON string, quoted
	fields []byte // `,"fields":{...}` or empty

	// The tailer stamps every line of one read chunk with the same time, so
	// formatting it once per chunk instead of once per line saves a
	// noticeable share of the encoding. Only the loop goroutine encodes.
	lastTS time.Time
	tsText []byte
}

func newEncoder(host string, fields map[string]string) *encoder {
	e := &encoder{host: schemas.AppendJSONString(nil, host)}
	if len(fields) > 0 {
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b := []byte(`,"fields":{`)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = schemas.AppendJSONString(b, k)
			b = append(b, ':')
			b = schemas.AppendJSONString(b, fields[k])
		}
		e.fields = append(b, '}')
	}
	return e
}

// encode appends the record value for ev and reports whether the line held
// invalid UTF-8 (replaced by U+FFFD in the output).
func (e *encoder) encode(dst []byte, id []byte, source []byte, ts time.Time, ev lineEvent) ([]byte, bool) {
	dst = append(dst, `{"event_id":"`...)
	dst = append(dst, id...)
	dst = append(dst, `","ts":"`...)
	if !ts.Equal(e.lastTS) || e.tsText == nil {
		e.lastTS = ts
		e.tsText = ts.UTC().AppendFormat(e.tsText[:0], time.RFC3339Nano)
	}
	dst = append(dst, e.tsText...)
	dst = append(dst, `","host":`...)
	dst = append(dst, e.host...)
	dst = append(dst, `,"source":`...)
	dst = append(dst, source...)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, ev.offset, 10)
	dst = append(dst, `,"line":`...)
	// A string view of the line, not a copy: AppendJSONStringValid only reads
	// it, and the bytes do not change during the call. string(ev.line)
	// allocated a copy of every line.
	dst, valid := schemas.AppendJSONStringValid(dst, unsafe.String(unsafe.SliceData(ev.line), len(ev.line)))
	dst = append(dst, `,"truncated":`...)
	dst = strconv.AppendBool(dst, ev.truncated)
	dst = append(dst, `,"invalid_utf8":`...)
	dst = strconv.AppendBool(dst, !valid)
	dst = append(dst, e.fields...)
	return append(dst, '}'), !valid
}
