package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request framing, as Kafka defines it:
//
//	int32  size            bytes that follow; checked against
//	                       socket.request.max.bytes before any allocation
//	int16  api_key
//	int16  api_version
//	int32  correlation_id  echoed in the response header
//	int16+ client_id       nullable string (length -1 = null)
//	tags                   only in header v2, i.e. when the API version is
//	                       flexible (KIP-482): uvarint count, then per tag a
//	                       uvarint key, uvarint size and the bytes
//	...    body            decoded by kmsg
//
// Responses are int32 size, int32 correlation_id, then (header v1, flexible
// versions) an empty tag section, then the body. ApiVersions always answers
// with header v0 so that a client can read it before it knows the versions.

const apiVersionsKey = 18

// request is one parsed request with its header.
type request struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
	// body is the decoded request; nil when unsupportedAPIVersions is set.
	body kmsg.Request
	// unsupportedAPIVersions marks an ApiVersions request at a version this
	// broker does not serve: its body cannot be decoded, and it is answered
	// with UNSUPPORTED_VERSION (KIP-511).
	unsupportedAPIVersions bool
	// size is the frame's size prefix, the bytes a producer byte rate
	// counts. Beside the bool, so the struct stays in its size class.
	size int32
	conn *conn
}

// clientIDString is the client ID, "" when null.
func (r *request) clientIDString() string {
	if r.clientID == nil {
		return ""
	}
	return *r.clientID
}

// closeError is a decision to close the connection, with the reason logged.
type closeError struct{ reason string }

func (e *closeError) Error() string { return e.reason }

func closef(format string, args ...any) error {
	return &closeError{reason: fmt.Sprintf(format, args...)}
}

var errTruncated = errors.New("truncated")

// checkSize vets a frame's size prefix before anything is allocated for it.
func checkSize(size, maxBytes int32) error {
	if size < requestHeaderMinBytes || size > maxBytes {
		return closef("request size %d is outside %d to %d (socket.request.max.bytes)", size, requestHeaderMinBytes, maxBytes)
	}
	return nil
}

// beforeDecode is called by parseRequest with a request's header fields
// and undecoded body; an error refuses the request.
type beforeDecode func(key, version int16, flexible bool, body []byte) error

// parseRequest decodes a frame (the bytes after the size prefix). A client
// ID longer than maxClientID bytes is refused; check, when set, vets the
// body before it is decoded. An error means the connection must close; it
// says why.
func parseRequest(frame []byte, maxClientID int, check beforeDecode) (*request, error) {
	if len(frame) < requestHeaderMinBytes {
		return nil, closef("request of %d bytes is shorter than a request header (%d bytes)", len(frame), requestHeaderMinBytes)
	}
	r := &request{
		key:           int16(binary.BigEndian.Uint16(frame[0:])),
		version:       int16(binary.BigEndian.Uint16(frame[2:])),
		correlationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	entry, served := lookup(r.key, r.version)
	if !served {
		if r.key == apiVersionsKey && entry != nil && r.version > entry.max {
			r.unsupportedAPIVersions = true
			return r, nil
		}
		if entry == nil {
			return r, closef("unknown or unserved API key %d (version %d)", r.key, r.version)
		}
		return r, closef("API key %d version %d is outside the served versions %d to %d", r.key, r.version, entry.min, entry.max)
	}
	body := kmsg.RequestForKey(r.key)
	body.SetVersion(r.version)
	rest := frame[8:]
	var err error
	if r.clientID, rest, err = readNullableString(rest); err != nil {
		return r, closef("API key %d version %d: malformed client id: %v", r.key, r.version, err)
	}
	if n := len(r.clientIDString()); n > maxClientID {
		r.clientID = nil // not logged
		return r, closef("API key %d version %d: client id of %d bytes is longer than millrace.client.id.max.bytes %d", r.key, r.version, n, maxClientID)
	}
	if body.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return r, closef("API key %d version %d: malformed header tags: %v", r.key, r.version, err)
		}
	}
	if check != nil {
		if err := check(r.key, r.version, body.IsFlexible(), rest); err != nil {
			return r, err
		}
	}
	// A Produce request is decoded in place: its record batches and topic
	// names alias the frame, which is recycled once the request is answered
	// (framepool.go), so the Produce path copies whatever it keeps. Every
	// other request is decoded with copied strings: what their handlers keep
	// (group, member and client IDs, topic names in the group coordinator,
	// config names) then owns its few bytes instead of pinning the whole
	// frame, and no handler has to remember to copy.
	if u, ok := body.(kmsg.UnsafeReadFrom); ok && r.key == produceKey {
		err = u.UnsafeReadFrom(rest)
	} else {
		err = body.ReadFrom(rest)
	}
	if err != nil {
		return r, closef("API key %d version %d: malformed request body: %v", r.key, r.version, err)
	}
	r.body = body
	return r, nil
}

func readNullableString(b []byte) (*string, []byte, error) {
	if len(b) < 2 {
		return nil, nil, errTruncated
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n < 0 {
		if n != -1 {
			return nil, nil, fmt.Errorf("string length %d", n)
		}
		return nil, b, nil
	}
	if len(b) < int(n) {
		return nil, nil, errTruncated
	}
	s := string(b[:n])
	return &s, b[n:], nil
}

// skipTags skips a tagged-field section; the request header defines no tags
// that the broker reads.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, errTruncated
	}
	b = b[n:]
	for ; count > 0; count-- {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errTruncated
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errTruncated
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// encodeResponse frames a response to r.
func encodeResponse(r *request, resp kmsg.Response) []byte {
	out := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(out[4:], uint32(r.correlationID))
	if resp.IsFlexible() && r.key != apiVersionsKey {
		out = append(out, 0) // empty header tag section
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}
