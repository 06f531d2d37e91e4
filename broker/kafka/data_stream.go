package kafka

// Streamed responses: a Fetch response whose record bytes go from the log
// segment to the socket with sendfile(2) (docs/architecture.md §2, the zero-copy path),
// while everything else is encoded by kmsg.
//
// To find where the records go in kmsg's encoding, the response is encoded
// twice: with every streamed partition's RecordBatches nil, and with them
// empty but not nil. Nothing else differs, so the two encodings differ
// exactly at those length fields — 4 bytes 0xffffffff against 0x00000000 in
// non-flexible versions (int32 length, -1 = null), one byte 0x00 against
// 0x01 in flexible ones (uvarint length+1, 0 = null). The frame is then
// written as: skeleton up to the first field, the real length (int32 N, or
// uvarint N+1), the records by Slice.WriteTo (sendfile on a TCP socket, a
// plain copy otherwise: a TLS connection is no syscall.Conn, so its records
// are copied through the TLS writer to be encrypted), the skeleton up to the next field, and so on. The
// frame size prefix is recomputed to count the real lengths and records.
// Should the encodings ever not differ as expected, the records are read
// into memory and the response encoded the ordinary way instead.

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"
	"millrace/broker/replication"
)

// streamedResponse is a response that the connection writes as a
// responseStream instead of encoding it whole.
type streamedResponse interface {
	kmsg.Response
	// stream frames the response to r; the stream owns the log slices from
	// then on.
	stream(r *request) *responseStream
}

// responseStream is a framed response in pieces: bytes, then optionally a
// log slice, repeated. It holds the slices' segment references until
// release.
type responseStream struct {
	parts []streamPart
}

type streamPart struct {
	bytes []byte
	slice *log.Slice // written after bytes when set
}

// writeTo writes the whole frame to w, adding the record bytes it writes
// from log slices (not through the in-memory fallback) to streamed, the
// broker's count, as each slice is written: before the frame's last bytes,
// so a client that has the whole response sees them counted.
func (s *responseStream) writeTo(w io.Writer, streamed *atomic.Int64) error {
	for _, p := range s.parts {
		if _, err := w.Write(p.bytes); err != nil {
			return err
		}
		if p.slice == nil {
			continue
		}
		n, err := p.slice.WriteTo(w)
		if err != nil {
			return err
		}
		streamed.Add(n)
		if n != int64(p.slice.Len()) {
			// The frame's length prefixes promised more: the stream is
			// broken and the connection must close.
			return fmt.Errorf("wrote %d of %d record bytes", n, p.slice.Len())
		}
	}
	return nil
}

// bytes returns the whole frame as one byte slice (records copied).
func (s *responseStream) bytes() ([]byte, error) {
	var out []byte
	for _, p := range s.parts {
		out = append(out, p.bytes...)
		if p.slice == nil {
			continue
		}
		data, err := p.slice.ReadAll()
		if err != nil {
			return nil, err
		}
		out = append(out, data...)
	}
	return out, nil
}

// release closes the slices, whether or not the stream was written.
func (s *responseStream) release() {
	for _, p := range s.parts {
		if p.slice != nil {
			p.slice.Close()
		}
	}
}

// streamedFetch is a Fetch response whose records are log slices.
type streamedFetch struct {
	*kmsg.FetchResponse
	records []fetchRecords
	// For the metrics of KIP-392 (fetch_read_replica.go): partitions read
	// as a follower and their record bytes, and partitions sent to their
	// preferred read replica.
	followerReads int
	followerBytes int64
	redirected    int
}

// fetchRecords locates one partition's records: indexes into Topics and
// Partitions, and the slice (non-empty).
type fetchRecords struct {
	topic, partition int
	slice            *log.Slice
}

func (f *streamedFetch) part(rec fetchRecords) *kmsg.FetchResponseTopicPartition {
	return &f.Topics[rec.topic].Partitions[rec.partition]
}

func (f *streamedFetch) stream(r *request) *responseStream {
	if len(f.records) == 0 {
		return &responseStream{parts: []streamPart{{bytes: encodeResponse(r, f.FetchResponse)}}}
	}
	for _, rec := range f.records {
		f.part(rec).RecordBatches = nil
	}
	withNull := encodeResponse(r, f.FetchResponse)
	for _, rec := range f.records {
		f.part(rec).RecordBatches = []byte{}
	}
	withEmpty := encodeResponse(r, f.FetchResponse)
	flexible := f.IsFlexible()
	positions, ok := locateRecordFields(withNull, withEmpty, flexible, len(f.records))
	if !ok {
		return f.copied(r)
	}
	fieldLen := 4
	if flexible {
		fieldLen = 1
	}
	size := int64(len(withNull)) - 4 - int64(len(positions)*fieldLen)
	s := &responseStream{parts: make([]streamPart, 0, len(positions)+1)}
	prev := 0
	for i, pos := range positions {
		n := f.records[i].slice.Len()
		piece := append([]byte(nil), withNull[prev:pos]...)
		if flexible {
			piece = binary.AppendUvarint(piece, uint64(n)+1)
		} else {
			piece = binary.BigEndian.AppendUint32(piece, uint32(n))
		}
		size += int64(len(piece)-(pos-prev)) + int64(n)
		s.parts = append(s.parts, streamPart{bytes: piece, slice: f.records[i].slice})
		prev = pos + fieldLen
	}
	s.parts = append(s.parts, streamPart{bytes: withNull[prev:]})
	binary.BigEndian.PutUint32(s.parts[0].bytes, uint32(size))
	return s
}

// copied is the fallback: read the records into the response and encode it
// the ordinary way.
func (f *streamedFetch) copied(r *request) *responseStream {
	for _, rec := range f.records {
		data, err := rec.slice.ReadAll()
		rec.slice.Close()
		p := f.part(rec)
		if err != nil {
			p.ErrorCode, _ = replication.LogErrorCode(err)
			p.RecordBatches = []byte{}
			continue
		}
		p.RecordBatches = data
	}
	f.records = nil
	return &responseStream{parts: []streamPart{{bytes: encodeResponse(r, f.FetchResponse)}}}
}

// locateRecordFields returns the positions of the n record length fields,
// from the encodings with null and with empty records; ok is false if the
// encodings do not differ exactly as expected.
func locateRecordFields(withNull, withEmpty []byte, flexible bool, n int) ([]int, bool) {
	if len(withNull) != len(withEmpty) {
		return nil, false
	}
	nullField, emptyField := []byte{0xff, 0xff, 0xff, 0xff}, []byte{0, 0, 0, 0}
	if flexible {
		nullField, emptyField = []byte{0}, []byte{1}
	}
	positions := make([]int, 0, n)
	for i := 0; i < len(withNull); i++ {
		if withNull[i] == withEmpty[i] {
			continue
		}
		j := i
		for j < len(withNull) && withNull[j] != withEmpty[j] {
			j++
		}
		if j-i != len(nullField) || string(withNull[i:j]) != string(nullField) || string(withEmpty[i:j]) != string(emptyField) {
			return nil, false
		}
		positions = append(positions, i)
		i = j - 1
	}
	return positions, len(positions) == n
}
