package syslog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// RFC 6587 frames syslog over a stream two ways, and senders mix them
// (rsyslog's omfwd sends newline-terminated messages, its TCP_Framing
// "octet-counted" and logger --octet-count the other): §3.4.1 octet
// counting, "MSG-LEN SP SYSLOG-MSG", and §3.4.2 non-transparent framing, a
// message ended by LF. A syslog message starts with '<', never with a digit,
// so a digit first means a length.

// maxLengthDigits bounds MSG-LEN's digits; more is not a length anyone sends.
const maxLengthDigits = 10

// errFraming is a stream whose framing cannot be followed: the connection
// is closed, as nothing after it can be told apart.
var errFraming = errors.New("syslog framing")

// frameReader reads messages from a stream. It holds at most max bytes of
// a message and its bufio.Reader's buffer, whatever the sender sends.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// newFrameReader reads r with messages of at most max bytes.
func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, min(max, 64<<10)), max: max}
}

// next returns the next message, valid until the following call, and
// whether it was cut to max bytes (the rest was read and discarded). At the
// end of the stream it returns io.EOF; a message ended by the end of the
// stream rather than LF is returned first.
func (f *frameReader) next() (msg []byte, truncated bool, err error) {
	for {
		first, err := f.r.Peek(1)
		if err != nil {
			return nil, false, err
		}
		if first[0] >= '0' && first[0] <= '9' {
			return f.octetCounted()
		}
		msg, truncated, err = f.line()
		if err != nil && !(err == io.EOF && len(msg) > 0) {
			return nil, false, err
		}
		// Blank lines (a CR LF sender's keep-alive) are no messages.
		if len(msg) > 0 || truncated {
			return msg, truncated, nil
		}
	}
}

// octetCounted reads "MSG-LEN SP SYSLOG-MSG".
func (f *frameReader) octetCounted() ([]byte, bool, error) {
	length := 0
	for digits := 0; ; digits++ {
		c, err := f.r.ReadByte()
		if err != nil {
			return nil, false, unexpected(err)
		}
		if c == ' ' && digits > 0 {
			break
		}
		if c < '0' || c > '9' || digits == maxLengthDigits {
			return nil, false, fmt.Errorf("%w: an octet-counted frame's length is not 1 to %d digits followed by a space", errFraming, maxLengthDigits)
		}
		length = length*10 + int(c-'0')
	}
	if length == 0 {
		return nil, false, fmt.Errorf("%w: an octet-counted frame has length 0", errFraming)
	}
	keep := min(length, f.max)
	f.buf = grow(f.buf, keep)
	if _, err := io.ReadFull(f.r, f.buf); err != nil {
		return nil, false, unexpected(err)
	}
	if length > keep {
		if _, err := f.r.Discard(length - keep); err != nil {
			return nil, false, unexpected(err)
		}
	}
	return f.buf, length > keep, nil
}

// line reads up to LF, keeping at most max bytes; a trailing CR is removed.
func (f *frameReader) line() ([]byte, bool, error) {
	f.buf = f.buf[:0]
	truncated := false
	for {
		chunk, err := f.r.ReadSlice('\n')
		end := len(chunk)
		if err == nil {
			end-- // the LF
		}
		if room := f.max - len(f.buf); end > room {
			end, truncated = room, true
		}
		f.buf = append(f.buf, chunk[:end]...)
		switch {
		case err == nil:
			if !truncated {
				f.buf = bytes.TrimSuffix(f.buf, []byte{'\r'})
			}
			return f.buf, truncated, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return f.buf, truncated, err
		}
	}
}

// grow returns b resized to n bytes, reusing its array when it can.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// unexpected turns an end of stream inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
