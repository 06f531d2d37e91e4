package kafka

// A Produce request may be as large as socket.request.max.bytes, but only
// its record batches need to be: they are kept as they are and cost their
// size. The rest of the request (topics, partitions, tagged fields) is
// decoded by kmsg into structs, maps and strings, which for an
// attacker-chosen layout costs up to about requestDecodeFactor times its
// bytes. produceStructureBytes walks the request's framing without
// allocating, so that this part is held to millrace.control.request.max.bytes
// and charged against queued.max.request.bytes like any other request,
// before kmsg decodes it.
//
// Produce layout (after the request header), v3-v13; "flexible" is v9+
// (compact strings, arrays and bytes: uvarint length+1, and a tagged-field
// section after each struct):
//
//	transactional_id  nullable string
//	acks              int16
//	timeout_ms        int32
//	topics            array of
//	  name            string (v3-v12) | topic_id uuid, 16 bytes (v13+)
//	  partitions      array of
//	    index         int32
//	    records       nullable bytes
//	    [tags]
//	  [tags]
//	[tags]

import (
	"encoding/binary"
	"errors"
)

var errProduceFraming = errors.New("malformed produce request")

// structureReader reads the framing of a Produce request.
type structureReader struct {
	b        []byte
	flexible bool
	bad      bool
}

func (r *structureReader) skip(n int) {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return
	}
	r.b = r.b[n:]
}

func (r *structureReader) int32() int32 {
	if r.bad || len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

func (r *structureReader) uvarint() int {
	v, n := binary.Uvarint(r.b)
	if r.bad || n <= 0 || v > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// length reads a string, bytes or array length; -1 is null.
func (r *structureReader) length(wide bool) int {
	switch {
	case r.flexible:
		return r.uvarint() - 1
	case wide:
		return int(r.int32())
	case r.bad || len(r.b) < 2:
		r.bad = true
		return 0
	default:
		v := int16(binary.BigEndian.Uint16(r.b))
		r.b = r.b[2:]
		return int(v)
	}
}

// string skips a (nullable) string.
func (r *structureReader) string() {
	if n := r.length(false); n > 0 {
		r.skip(n)
	}
}

// tags skips a tagged-field section (flexible versions only).
func (r *structureReader) tags() {
	if !r.flexible {
		return
	}
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		r.uvarint()
		r.skip(r.uvarint())
	}
}

// produceStructureBytes is the number of bytes of a Produce request body
// that are not record batches. The body is checked only as far as needed
// to find them; kmsg still decodes and checks it all.
func produceStructureBytes(body []byte, version int16, flexible bool) (int, error) {
	r := &structureReader{b: body, flexible: flexible}
	records := 0
	r.string()    // transactional_id
	r.skip(2 + 4) // acks, timeout_ms
	for topics := r.length(true); topics > 0 && !r.bad; topics-- {
		if version >= 13 {
			r.skip(16)
		} else {
			r.string()
		}
		for partitions := r.length(true); partitions > 0 && !r.bad; partitions-- {
			r.skip(4)
			if n := r.length(true); n > 0 {
				r.skip(n)
				records += n
			}
			r.tags()
		}
		r.tags()
	}
	r.tags()
	if r.bad {
		return 0, errProduceFraming
	}
	return len(body) - records, nil
}
