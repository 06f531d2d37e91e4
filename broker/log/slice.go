package log

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// Slice is a run of whole batches from one segment, returned by Read. It
// holds a reference on the segment, so retention or truncation deleting the
// segment meanwhile does not break it: the files go when the last Slice on
// them is closed. A Slice is not safe for concurrent use.
type Slice struct {
	seg         *segment // nil for an empty Slice
	pos, n      int64    // byte range in the segment's .log
	first, next int64
	done        int64 // bytes already consumed by Read or WriteTo
	closed      bool
}

// Len is the number of bytes.
func (s *Slice) Len() int { return int(s.n) }

// FirstOffset is the base offset of the first batch (which may be below the
// offset asked for, as batches are returned whole), or the offset asked for
// if the Slice is empty.
func (s *Slice) FirstOffset() int64 { return s.first }

// NextOffset is the offset after the last batch returned; for an empty Slice
// the offset asked for.
func (s *Slice) NextOffset() int64 { return s.next }

// WriteTo copies the batches to w. For a socket (a syscall.Conn such as
// *net.TCPConn) it uses sendfile(2) with an explicit file offset through the
// connection's RawConn, so concurrent readers of one segment never share a
// file position and the bytes never enter user space; otherwise it uses
// positional reads. io.Copy(conn, slice) comes here.
func (s *Slice) WriteTo(w io.Writer) (int64, error) {
	if s.done >= s.n {
		return 0, nil
	}
	if s.closed {
		return 0, ErrClosed
	}
	pos, n := s.pos+s.done, s.n-s.done
	src := s.seg.log
	if cf, ok := src.(*cachedFile); ok {
		// Held open for the whole copy: the cache may not close it under sendfile.
		f, err := cf.pin()
		if err != nil {
			return 0, err
		}
		defer cf.unpin()
		src = f
	}
	if f, ok := src.(*os.File); ok {
		if conn, ok := w.(syscall.Conn); ok {
			if _, isFile := w.(*os.File); !isFile {
				written, handled, err := sendfile(conn, f, pos, n)
				if handled {
					s.done += written
					return written, err
				}
			}
		}
	}
	written, err := io.Copy(w, io.NewSectionReader(s.seg.log, pos, n))
	s.done += written
	return written, err
}

// Read reads the batches sequentially (positional reads, no shared file
// position); it makes a Slice an io.Reader so io.Copy accepts it, and
// io.Copy then uses WriteTo.
func (s *Slice) Read(p []byte) (int, error) {
	if s.done >= s.n {
		return 0, io.EOF
	}
	if s.closed {
		return 0, ErrClosed
	}
	p = p[:min(int64(len(p)), s.n-s.done)]
	n, err := s.seg.log.ReadAt(p, s.pos+s.done)
	s.done += int64(n)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

// sendfile copies n bytes at pos of src to the socket dst. handled is false
// if the kernel refused before anything was sent, so the caller can fall back.
func sendfile(dst syscall.Conn, src *os.File, pos, n int64) (written int64, handled bool, err error) {
	dstRaw, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	srcRaw, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var sendErr error
	var werr error
	// Control keeps the source descriptor open for the whole copy.
	cerr := srcRaw.Control(func(srcFd uintptr) {
		werr = dstRaw.Write(func(dstFd uintptr) bool {
			for written < n {
				off := pos + written
				m, e := syscall.Sendfile(int(dstFd), int(srcFd), &off, int(min(n-written, 1<<30)))
				if m > 0 {
					written += int64(m)
				}
				switch {
				case e == syscall.EAGAIN:
					return false // wait until the socket is writable
				case e == syscall.EINTR:
					continue
				case e != nil:
					sendErr = e
					return true
				case m == 0:
					sendErr = io.ErrUnexpectedEOF // the file is shorter than the Slice
					return true
				}
			}
			return true
		})
	})
	if written == 0 && (errors.Is(sendErr, syscall.EINVAL) || errors.Is(sendErr, syscall.ENOSYS) || errors.Is(sendErr, syscall.EOPNOTSUPP)) {
		return 0, false, nil
	}
	return written, true, errors.Join(sendErr, werr, cerr)
}

// ReadAll returns the batches as one byte slice.
func (s *Slice) ReadAll() ([]byte, error) {
	if s.n == 0 {
		return nil, nil
	}
	if s.closed {
		return nil, ErrClosed
	}
	b := make([]byte, s.n)
	n, err := s.seg.log.ReadAt(b, s.pos)
	if err == io.EOF && int64(n) == s.n {
		err = nil
	}
	return b[:n], err
}

// Close releases the segment reference. It is safe to call twice.
func (s *Slice) Close() error {
	if s.closed || s.seg == nil {
		s.closed = true
		return nil
	}
	s.closed = true
	return s.seg.release()
}
