package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// File is the filesystem store. An object created as "a/b/part-1.parquet" is
// written as "<root>/a/b/.tmp-part-1.parquet-<16 hex>" and hard-linked to
// "<root>/a/b/part-1.parquet" (or the name given to PublishAs) on Publish.
// The temporary name keeps the name given to Create so Cleanup can tell
// whose leftover it is.
type File struct {
	root   string
	logger *slog.Logger
}

// NewFile returns a store rooted at dir, creating it if needed.
func NewFile(dir string, logger *slog.Logger) (*File, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return &File{root: abs, logger: logger.With("component", "store", "store", "file")}, nil
}

// Root returns the store's directory.
func (s *File) Root() string { return s.root }

func (s *File) path(name string) string { return filepath.Join(s.root, filepath.FromSlash(name)) }

// Create implements Store.
func (s *File) Create(ctx context.Context, name string) (Object, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	final := s.path(name)
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	tmp := filepath.Join(dir, tmpPrefix+filepath.Base(final)+"-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return &fileObject{store: s, name: name, tmp: tmp, f: f, ctx: ctx, pace: pacerOf(ctx)}, nil
}

type fileObject struct {
	store *File
	name  string
	tmp   string
	// pace, when not nil, paces Writes; ctx (Create's) bounds its waits.
	ctx  context.Context
	pace Pacer

	mu  sync.Mutex // guards the following
	f   *os.File   // nil after Publish or Abort
	err error      // sticky write error
}

func (o *fileObject) Name() string { return o.name }

func (o *fileObject) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return 0, ErrClosed
	}
	if o.err != nil {
		return 0, o.err
	}
	if o.pace == nil {
		return o.write(p)
	}
	var n int
	for len(p) > 0 {
		piece := p[:min(len(p), pacedChunk)]
		if err := o.pace.Wait(o.ctx, len(piece)); err != nil {
			return n, err
		}
		m, err := o.write(piece)
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// write writes p to the file; a failure is sticky. The caller holds o.mu.
func (o *fileObject) write(p []byte) (int, error) {
	n, err := o.f.Write(p)
	if err != nil {
		o.err = fmt.Errorf("store: write %s: %w", o.name, err)
		return n, o.err
	}
	return n, nil
}

// Publish implements Object.
func (o *fileObject) Publish(ctx context.Context) error { return o.PublishAs(ctx, o.name) }

// PublishAs fsyncs the file, links it under the final name and fsyncs the
// directory so the link survives a power loss. link(2), unlike rename(2),
// fails when the name exists, so a published object is never replaced; the
// temporary name is removed afterwards (a crash in between leaves a leftover
// for Cleanup, never a half-published file).
func (o *fileObject) PublishAs(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return ErrClosed
	}
	if o.err != nil {
		return o.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f := o.f
	if err := f.Sync(); err != nil {
		o.err = fmt.Errorf("store: fsync %s: %w", o.name, err)
		return o.err
	}
	if err := f.Close(); err != nil {
		o.err = fmt.Errorf("store: close %s: %w", o.name, err)
		return o.err
	}
	o.f = nil
	defer os.Remove(o.tmp)
	final := o.store.path(name)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("store: publish %s: %w", name, err)
	}
	if err := os.Link(o.tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return fmt.Errorf("store: publish %s: %w", name, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return fmt.Errorf("store: publish %s: %w", name, err)
	}
	return nil
}

func (o *fileObject) Abort(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return nil
	}
	cerr := o.f.Close()
	o.f = nil
	if err := os.Remove(o.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: abort %s: %w", o.name, err)
	}
	if cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		return fmt.Errorf("store: abort %s: %w", o.name, cerr)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Open implements Store.
func (s *File) Open(ctx context.Context, name string) (Reader, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return fileReader{f, st.Size()}, nil
}

// fileReader is a published file and its size when opened (a published
// file is never written in place).
type fileReader struct {
	*os.File
	size int64
}

func (r fileReader) Size() int64 { return r.size }

// walk calls fn for every regular file whose slash name starts with prefix.
func (s *File) walk(prefix string, fn func(name string, d fs.DirEntry) error) error {
	// Start at the deepest directory the prefix names, not at the root.
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = s.path(prefix[:i])
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a directory removed under us, or a prefix that names nothing
			}
			return err
		}
		rel, rerr := filepath.Rel(s.root, p)
		if rerr != nil {
			return rerr
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != start && !strings.HasPrefix(name+"/", prefix) && !strings.HasPrefix(prefix, name+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(name, prefix) {
			return nil
		}
		return fn(name, d)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// List implements Store.
func (s *File) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := s.walk(prefix, func(name string, d fs.DirEntry) error {
		if strings.HasPrefix(path.Base(name), tmpPrefix) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Name: name, Size: info.Size(), ModTime: info.ModTime()})
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove implements Store.
func (s *File) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// finalName recovers the final name from a temporary file's name, or "".
func finalName(tmpName string) string {
	dir, base := path.Split(tmpName)
	if !strings.HasPrefix(base, tmpPrefix) {
		return ""
	}
	base = strings.TrimPrefix(base, tmpPrefix)
	i := strings.LastIndex(base, "-")
	if i <= 0 || len(base)-i-1 != 16 {
		return ""
	}
	return dir + base[:i]
}

// Cleanup implements Store: it removes temporary files whose final name
// matches.
func (s *File) Cleanup(ctx context.Context, prefix string, match func(string) bool) (int, error) {
	var n int
	// The prefix applies to final names; a temporary file's name differs in
	// its last element, so walk the prefix's directory and compare final names.
	dirPrefix := prefix[:strings.LastIndex(prefix, "/")+1]
	err := s.walk(dirPrefix, func(name string, d fs.DirEntry) error {
		final := finalName(name)
		if final == "" || !strings.HasPrefix(final, prefix) || (match != nil && !match(final)) {
			return nil
		}
		if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		s.logger.Info("removed leftover temporary file", "name", name, "final", final)
		return ctx.Err()
	})
	if err != nil {
		return n, fmt.Errorf("store: cleanup %q: %w", prefix, err)
	}
	return n, nil
}

// Close implements Store.
func (s *File) Close() error { return nil }
