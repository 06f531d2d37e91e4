package log

import (
	"container/list"
	"errors"
	"os"
	"strings"
	"sync"
)

// DefaultMaxOpenFiles is the default of millrace.log.max.open.files: how
// many segment files (.log, .index, .timeindex, .txnindex) the logs of one
// broker keep open at once. Kafka keeps every segment's files open for the
// segment's life, so 10,000 partitions of a few segments need tens of
// thousands of descriptors; here a partition nobody reads or writes costs
// none, and the broker as a whole stays well under a common 4,096
// descriptor limit with room for connections.
const DefaultMaxOpenFiles = 2048

// fileCache bounds the open descriptors of the segment files of the logs
// that share it (one per Manager). A file is opened on first use and closed
// again, least recently used first, when more than limit are open; the
// next use reopens it. A file in use (pinned, e.g. during a read or a
// sendfile) is never closed under its user, so the limit may be passed
// while more than limit files are in use at once.
//
// Closing a file that was written without fsync loses nothing: the data is
// in the page cache, and a later fsync through a reopened descriptor writes
// out the inode's dirty pages all the same.
type fileCache struct {
	limit int // 0: no limit (files are still opened lazily)

	mu  sync.Mutex // guards the following and every cachedFile's f, pins and elem
	lru list.List  // of *cachedFile with an open descriptor, most recently used first
}

// newFileCache returns a cache keeping at most limit files open, no limit
// if limit is 0.
func newFileCache(limit int) *fileCache { return &fileCache{limit: limit} }

// openCount is the number of descriptors the cache holds open.
func (c *fileCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// wrap returns an opener whose segment files (the .cleaned files a
// replacement writes too: it renames them through renameOpen) are held by
// the cache. The file is opened at once, so errors show where they did
// before.
func (c *fileCache) wrap(open openFileFunc) openFileFunc {
	return func(path string, flag int, perm os.FileMode) (file, error) {
		f, err := open(path, flag, perm)
		if err != nil || !cacheable(path) {
			return f, err
		}
		cf := c.lazy(open, path, flag)
		c.mu.Lock()
		cf.f = f
		victims := c.addLocked(cf)
		c.mu.Unlock()
		closeAll(victims)
		return cf, nil
	}
}

// lazy returns a file at path that is opened on first use (with flag, never
// creating or truncating it then).
func (c *fileCache) lazy(open openFileFunc, path string, flag int) *cachedFile {
	return &cachedFile{cache: c, open: open, path: path, flag: flag &^ (os.O_CREATE | os.O_TRUNC | os.O_EXCL)}
}

// cacheable reports whether path is a segment file, under its final name or
// a replacement's.
func cacheable(path string) bool {
	path = strings.TrimSuffix(path, cleanedSuffix)
	return strings.HasSuffix(path, logSuffix) || strings.HasSuffix(path, indexSuffix) ||
		strings.HasSuffix(path, timeIndexSuffix) || strings.HasSuffix(path, txnIndexSuffix)
}

// addLocked lists cf, just opened, as most recently used and returns the
// descriptors to close to get back under the limit.
func (c *fileCache) addLocked(cf *cachedFile) []file {
	cf.elem = c.lru.PushFront(cf)
	if c.limit <= 0 {
		return nil
	}
	var victims []file
	for e := c.lru.Back(); e != nil && c.lru.Len() > c.limit; {
		prev := e.Prev()
		if v := e.Value.(*cachedFile); v.pins == 0 {
			victims = append(victims, v.f)
			v.f, v.elem = nil, nil
			c.lru.Remove(e)
		}
		e = prev
	}
	return victims
}

func closeAll(files []file) {
	for _, f := range files {
		// A close error on a file only read or already written through
		// loses nothing; the writer's fsync reports write errors.
		_ = f.Close()
	}
}

// cachedFile is a segment file whose descriptor the cache may close between
// uses. It implements file; every call pins the descriptor for its length.
type cachedFile struct {
	cache *fileCache
	open  openFileFunc
	flag  int

	openMu sync.Mutex // serialises opening and renaming; guards path and closed
	path   string
	closed bool

	// under cache.mu
	f    file          // nil while closed by the cache
	pins int           // calls in progress
	elem *list.Element // in cache.lru while f is open
}

// pin returns the open descriptor, opening it if the cache closed it (or
// never opened it), and keeps the cache from closing it until unpin.
func (cf *cachedFile) pin() (file, error) {
	c := cf.cache
	c.mu.Lock()
	if cf.f != nil {
		cf.pins++
		c.lru.MoveToFront(cf.elem)
		f := cf.f
		c.mu.Unlock()
		return f, nil
	}
	c.mu.Unlock()
	cf.openMu.Lock()
	defer cf.openMu.Unlock()
	if cf.closed {
		return nil, os.ErrClosed
	}
	c.mu.Lock()
	if cf.f != nil { // opened by another caller meanwhile
		cf.pins++
		c.lru.MoveToFront(cf.elem)
		f := cf.f
		c.mu.Unlock()
		return f, nil
	}
	c.mu.Unlock()
	f, err := cf.open(cf.path, cf.flag, 0)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cf.f = f
	cf.pins++
	victims := c.addLocked(cf)
	c.mu.Unlock()
	closeAll(victims)
	return f, nil
}

func (cf *cachedFile) unpin() {
	cf.cache.mu.Lock()
	cf.pins--
	cf.cache.mu.Unlock()
}

// rename renames the file on disk from from to to and, if from is the
// name it opens, makes later opens use the new name; an open descriptor
// stays valid.
func (cf *cachedFile) rename(from, to string) error {
	cf.openMu.Lock()
	defer cf.openMu.Unlock()
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if cf.path == from {
		cf.path = to
	}
	return nil
}

// isOpen reports whether the file holds a descriptor now. Tests read it.
func (cf *cachedFile) isOpen() bool {
	cf.cache.mu.Lock()
	defer cf.cache.mu.Unlock()
	return cf.f != nil
}

func (cf *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := cf.pin()
	if err != nil {
		return 0, err
	}
	defer cf.unpin()
	return f.ReadAt(p, off)
}

func (cf *cachedFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := cf.pin()
	if err != nil {
		return 0, err
	}
	defer cf.unpin()
	return f.WriteAt(p, off)
}

func (cf *cachedFile) Sync() error {
	f, err := cf.pin()
	if err != nil {
		return err
	}
	defer cf.unpin()
	return f.Sync()
}

func (cf *cachedFile) Truncate(size int64) error {
	f, err := cf.pin()
	if err != nil {
		return err
	}
	defer cf.unpin()
	return f.Truncate(size)
}

func (cf *cachedFile) Stat() (os.FileInfo, error) {
	f, err := cf.pin()
	if err != nil {
		return nil, err
	}
	defer cf.unpin()
	return f.Stat()
}

// Close closes the descriptor if it is open and makes every later use fail.
// The segment closes its files only when its last reference goes, so no
// call is in progress.
func (cf *cachedFile) Close() error {
	cf.openMu.Lock()
	defer cf.openMu.Unlock()
	if cf.closed {
		return nil
	}
	cf.closed = true
	c := cf.cache
	c.mu.Lock()
	f := cf.f
	if f != nil {
		c.lru.Remove(cf.elem)
		cf.f, cf.elem = nil, nil
	}
	c.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close()
}

// renameOpen renames from to to, through f when it is a cached file so a
// later reopen finds it.
func renameOpen(f file, from, to string) error {
	if cf, ok := f.(*cachedFile); ok {
		return cf.rename(from, to)
	}
	return os.Rename(from, to)
}

// renameFile is renameOpen where a missing file is no error: a segment's
// index files may never have been written.
func renameFile(f file, from, to string) error {
	if err := renameOpen(f, from, to); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
