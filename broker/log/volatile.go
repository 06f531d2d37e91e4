package log

import (
	"io"
	"log/slog"
	"os"
	"sync"
)

// OpenManagerHoldingUnsynced is OpenManager for power-cut tests: every
// segment and index file is opened through a layer that keeps the writes
// since the file's last fsync in the process's memory and hands them to the
// kernel only at the fsync. Killing the process with SIGKILL then loses
// exactly what a power cut loses from the page cache, which a plain kill
// does not (the kernel would still write those pages out). Reads see the
// held writes, so the broker behaves as usual until it dies. Checkpoints and
// the other small files are written and fsynced at once anyway
// (internal/durable), and directory entries are not simulated: a file
// created and never fsynced survives here, where a power cut might lose it.
//
// Never for production: a file's unsynced writes are held in memory
// without bound.
//
// Its descriptors are never closed by the cache (the held writes live in
// the open file), whatever WithMaxOpenFiles says; files still open lazily.
func OpenManagerHoldingUnsynced(dataDir string, defaults Config, logger *slog.Logger, opts ...ManagerOption) (*Manager, error) {
	return openManager(dataDir, defaults, logger, options{openFile: openHoldingFile, files: newFileCache(0), threads: managerOpts(opts).recoveryThreads})
}

func openHoldingFile(path string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &holdingFile{f: f, size: fi.Size()}, nil
}

// holdingFile is the layer of OpenManagerHoldingUnsynced.
type holdingFile struct {
	f *os.File

	mu      sync.Mutex  // guards the following
	pending []heldWrite // writes since the last Sync, in order
	size    int64       // the file's size as its users see it
}

// heldWrite is one WriteAt not yet given to the kernel.
type heldWrite struct {
	off  int64
	data []byte
}

func (h *holdingFile) WriteAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending = append(h.pending, heldWrite{off: off, data: append([]byte(nil), p...)})
	h.size = max(h.size, off+int64(len(p)))
	return len(p), nil
}

// ReadAt reads the kernel's file, then lays the held writes over it.
func (h *holdingFile) ReadAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off >= h.size {
		return 0, io.EOF
	}
	want := len(p)
	n := int(min(int64(want), h.size-off))
	p = p[:n]
	got, err := h.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return got, err
	}
	clear(p[got:]) // beyond the kernel's file: only held writes
	for _, w := range h.pending {
		start, end := max(w.off, off), min(w.off+int64(len(w.data)), off+int64(n))
		if start < end {
			copy(p[start-off:end-off], w.data[start-w.off:end-w.off])
		}
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// Sync gives the held writes to the kernel and fsyncs.
func (h *holdingFile) Sync() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.pending) > 0 {
		w := h.pending[0]
		if _, err := h.f.WriteAt(w.data, w.off); err != nil {
			return err
		}
		h.pending = h.pending[1:]
	}
	h.pending = nil
	return h.f.Sync()
}

// Truncate cuts the held writes and the kernel's file.
func (h *holdingFile) Truncate(size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.pending[:0]
	for _, w := range h.pending {
		if w.off >= size {
			continue
		}
		if end := w.off + int64(len(w.data)); end > size {
			w.data = w.data[:size-w.off]
		}
		kept = append(kept, w)
	}
	h.pending = kept
	fi, err := h.f.Stat()
	if err != nil {
		return err
	}
	if size < fi.Size() {
		if err := h.f.Truncate(size); err != nil {
			return err
		}
	}
	h.size = size
	return nil
}

// Stat reports the size the file's users see.
func (h *holdingFile) Stat() (os.FileInfo, error) {
	fi, err := h.f.Stat()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return sizedInfo{FileInfo: fi, size: h.size}, nil
}

// Close drops the held writes, as a power cut would have: the log fsyncs
// whatever it still needs before it closes a file.
func (h *holdingFile) Close() error {
	h.mu.Lock()
	h.pending = nil
	h.mu.Unlock()
	return h.f.Close()
}

type sizedInfo struct {
	os.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }
