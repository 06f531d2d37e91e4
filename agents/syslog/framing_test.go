package syslog

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type frame struct {
	msg       string
	truncated bool
}

// readFrames reads every message of in with messages of at most max bytes,
// and the error that ended the stream.
func readFrames(in io.Reader, max int) ([]frame, error) {
	f := newFrameReader(in, max)
	var got []frame
	for {
		msg, truncated, err := f.next()
		if err != nil {
			return got, err
		}
		got = append(got, frame{string(msg), truncated})
	}
}

func TestFraming(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 600)
	for _, tc := range []struct {
		name string
		in   string
		want []frame
		err  error
	}{
		// RFC 6587 §3.4.2: LF ends a message; CR LF senders too.
		{name: "newline", in: "<13>a\n<13>b\r\n", want: []frame{{"<13>a", false}, {"<13>b", false}}, err: io.EOF},
		// The last message may end with the stream instead (logger closes).
		{name: "newline at eof", in: "<13>a\n<13>b", want: []frame{{"<13>a", false}, {"<13>b", false}}, err: io.EOF},
		{name: "blank lines", in: "\n\r\n<13>a\n\n", want: []frame{{"<13>a", false}}, err: io.EOF},
		// §3.4.1: octet counting, LF inside the message kept.
		{name: "octet counting", in: "7 <13>a\nb5 <13>c", want: []frame{{"<13>a\nb", false}, {"<13>c", false}}, err: io.EOF},
		// Senders may mix the two per message.
		{name: "mixed", in: "5 <13>a<13>b\n5 <13>c", want: []frame{{"<13>a", false}, {"<13>b", false}, {"<13>c", false}}, err: io.EOF},
		{name: "octet truncated", in: "600 " + long + "5 <13>c", want: []frame{{long[:512], true}, {"<13>c", false}}, err: io.EOF},
		{name: "line truncated", in: long + "\n<13>c\n", want: []frame{{long[:512], true}, {"<13>c", false}}, err: io.EOF},
		{name: "octet short", in: "10 <13>a", err: io.ErrUnexpectedEOF},
		{name: "octet no space", in: "12<13>a", err: errFraming},
		{name: "octet too many digits", in: "12345678901 <13>a", err: errFraming},
		{name: "octet zero", in: "0 <13>a", err: errFraming},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One byte per read, so that every split of the stream is seen.
			got, err := readFrames(iotest.OneByteReader(strings.NewReader(tc.in)), 512)
			if !errors.Is(err, tc.err) {
				t.Errorf("error = %v, want %v", err, tc.err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("frames = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("frame %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// An endless line holds no more than max bytes however long it runs.
func TestFramingEndlessLineIsBounded(t *testing.T) {
	t.Parallel()
	const max = 1024
	endless := io.LimitReader(repeatReader('x'), 8<<20)
	f := newFrameReader(endless, max)
	msg, truncated, err := f.next()
	if err != nil || !truncated || len(msg) != max {
		t.Fatalf("next = %d bytes, truncated %v, %v; want %d bytes truncated", len(msg), truncated, err, max)
	}
	if cap(f.buf) > 2*max+64<<10 {
		t.Errorf("buffer grew to %d bytes for max %d", cap(f.buf), max)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func FuzzFraming(f *testing.F) {
	for _, s := range []string{"<13>a\n", "5 <13>a", "600 x", "\r\n", "12<13>"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 16
		fr := newFrameReader(bytes.NewReader(in), max)
		for range len(in) + 1 {
			msg, _, err := fr.next()
			if err != nil {
				return
			}
			if len(msg) > max {
				t.Fatalf("a message of %d bytes for max %d", len(msg), max)
			}
		}
		t.Fatalf("more messages than bytes in %q", in)
	})
}
