package tail

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"millrace/schemas"
)

// fileKey is a file's device and inode.
type fileKey struct{ dev, ino uint64 }

// found is one regular file a scan matched or a directory listing holds.
type found struct {
	path string
	key  fileKey
	size int64
}

func statKey(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(st.Dev), ino: st.Ino}, true //nolint:unconvert // Dev's type differs by platform
}

func (t *Tailer) excluded(path string) bool {
	base := filepath.Base(path)
	for _, p := range t.cfg.Exclude {
		if ok, _ := filepath.Match(p, path); ok {
			return true
		}
		if ok, _ := filepath.Match(p, base); ok {
			return true
		}
	}
	return false
}

// scan expands the globs, notices renames, deletions and new files, and
// starts following new ones. On the first scan, files the registry does
// not know start at start_position.
func (t *Tailer) scan(initial bool) {
	now := time.Now()
	t.scanDue = false
	t.lastScan = now
	byKey := map[fileKey]found{}
	dirs := map[string]bool{}
	skipped := map[string]bool{}
	for _, g := range t.cfg.Paths {
		if d := filepath.Dir(g); !strings.ContainsAny(d, `*?[\`) {
			dirs[d] = true
		}
		matches, _ := filepath.Glob(g) // the pattern was validated
		for _, p := range matches {
			if t.excluded(p) {
				continue
			}
			fi, err := os.Lstat(p)
			if err == nil && fi.Mode()&os.ModeSymlink != 0 {
				if !t.cfg.Symlinks {
					t.skipLink(p, skipped)
					continue
				}
				// Known by the target's identity: reached through a link
				// and directly, it is one file (byKey keeps one path).
				fi, err = os.Stat(p)
			}
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			k, ok := statKey(fi)
			if !ok {
				continue
			}
			dirs[filepath.Dir(p)] = true
			if prev, dup := byKey[k]; !dup || p < prev.path {
				byKey[k] = found{path: p, key: k, size: fi.Size()}
			}
		}
	}
	t.skippedLinks = skipped
	t.watchDirs(dirs)

	live := map[fileKey]*harvester{}
	gone := map[fileKey]*harvester{}
	byPath := map[string]*harvester{}
	for _, h := range t.files {
		switch {
		case !h.gone:
			live[h.fileKey()] = h
			byPath[h.currentPath()] = h
		case !h.retired:
			gone[h.fileKey()] = h
		}
	}
	var fresh []found
	for _, f := range byKey {
		h := live[f.key]
		if h == nil {
			if h = gone[f.key]; h != nil {
				// Back inside the globs (renamed again, or a copy being
				// finished is matched): the same identity keeps reading.
				h.gone, h.drain = false, false
			}
		}
		if h == nil {
			fresh = append(fresh, f)
			continue
		}
		h.mu.Lock()
		if h.path != f.path {
			t.logger.Info("file renamed", "from", h.path, "to", f.path)
			t.metrics.rotations.WithLabelValues("rename").Inc()
			h.path = f.path
		}
		h.seen = now
		h.size = f.size
		h.mu.Unlock()
		if h.file == nil && f.size != h.readPos {
			h.wantOpen = true
		}
		delete(live, f.key)
	}
	// What is left in live was not found: renamed out of the globs or
	// deleted. An open file keeps being read through its descriptor until
	// close_inactive releases it; a closed one with bytes unread is looked
	// up by identity in its directory and finished (finish.go).
	var busy map[fileKey]bool
	for _, h := range live {
		h.gone = true
		if h.file == nil {
			if busy == nil {
				busy = t.busyKeys()
			}
			t.findGone(h, busy)
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].path < fresh[j].path })
	newIDs := false
	stale := map[string]RegistryEntry{}
	for _, f := range fresh {
		h, isNew := t.adopt(f, initial, now, stale)
		if p := byPath[f.path]; p != nil && p.fileKey() != f.key {
			h.pred = p
		}
		newIDs = newIDs || isNew
		t.mu.Lock()
		t.files = append(t.files, h)
		t.mu.Unlock()
	}
	if initial {
		t.resumeDormant(stale, now)
	}
	if newIDs {
		// A new identity must be durable before any of its lines ship, or
		// a crash could re-read them under a different id.
		if err := t.persist(); err != nil {
			t.logger.Error("writing registry", "err", err)
		}
	}
}

func (h *harvester) fileKey() fileKey { return fileKey{h.dev, h.ino} }

// skipLink records a symlink the scan skips, logging and counting it the
// first time: a link that stays matched is not reported at every scan.
func (t *Tailer) skipLink(path string, skipped map[string]bool) {
	skipped[path] = true
	if t.skippedLinks[path] {
		return
	}
	t.metrics.symlinks.Inc()
	t.logger.Warn("skipping a symbolic link the globs match; set symlinks: true to follow links", "path", path)
}

// openFile opens path for reading. Unless symlinks is on, a link at its
// last component is refused (O_NOFOLLOW): one may replace a file between
// the scan and the open.
func (t *Tailer) openFile(path string) (*os.File, error) {
	return openRead(path, t.cfg.Symlinks)
}

func openRead(path string, follow bool) (*os.File, error) {
	if follow {
		return os.Open(path)
	}
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// adopt creates the harvester for a newly found file: resumed from its
// registry entry when device, inode and fingerprint agree, otherwise new.
//
// An entry with the same device and inode that does not match describes
// content that is gone from this inode (truncated, replaced, or the inode
// reused). On the first scan it goes into stale, so resumeDormant can look
// for a copytruncate copy holding its unread rest; later it is dropped.
func (t *Tailer) adopt(f found, initial bool, now time.Time, stale map[string]RegistryEntry) (*harvester, bool) {
	t.mu.Lock()
	var entry *RegistryEntry
	knownPath := false
	for id, e := range t.dormant {
		if e.Path == f.path {
			knownPath = true
		}
		if e.Device == f.key.dev && e.Inode == f.key.ino {
			if entry == nil && f.size >= e.Offset && t.fingerprintMatches(f.path, e) {
				entry = &e
			} else if initial {
				stale[id] = e
			}
			delete(t.dormant, id)
		}
	}
	t.mu.Unlock()
	if entry != nil {
		h := t.newHarvester(entry.ID, entry.Source, f, entry.Offset, now)
		h.fpLen, h.fpHash = entry.FingerprintLen, entry.Fingerprint
		t.logger.Info("resuming file", "path", f.path, "offset", entry.Offset)
		return h, false
	}
	var start int64
	// start_position "end" skips the history of files met for the first
	// time; a new file at a path the registry knew is a rotation's
	// successor, written while the tailer was down, and is read whole.
	if initial && t.cfg.StartPosition == "end" && !knownPath {
		start = f.size
	}
	t.logger.Info("following new file", "path", f.path, "offset", start)
	return t.newHarvester(newFileID(), f.path, f, start, now), true
}

// fingerprintMatches reports whether the file at path starts with the
// bytes e's fingerprint hashed. An entry stored while its file was still
// empty has no fingerprint (and offset 0: a line is only shipped after
// its file's first bytes are fingerprinted) and matches any file.
func (t *Tailer) fingerprintMatches(path string, e RegistryEntry) bool {
	return fingerprintAt(path, e.FingerprintLen, e.Fingerprint, t.cfg.Symlinks)
}

func (t *Tailer) newHarvester(id, source string, f found, offset int64, now time.Time) *harvester {
	t.orderSeq++
	return &harvester{
		id:       id,
		idPrefix: eventIDPrefix(id),
		source:   source,
		sourceJS: schemas.AppendJSONString(nil, source),
		key:      t.recordKey(source),
		dev:      f.key.dev,
		ino:      f.key.ino,
		readPos:  offset,
		order:    t.orderSeq,
		wantOpen: true,
		lastData: now,
		path:     f.path,
		seen:     now,
		size:     f.size,
		emitted:  offset,
	}
}

// openHarvester opens h's file at its position, making room under
// max_open_files first. It reports whether h is open.
func (t *Tailer) openHarvester(h *harvester) bool {
	// Make room first, so the cap holds even for a moment.
	for t.open >= t.cfg.MaxOpenFiles {
		if !t.evict(h) {
			return false
		}
	}
	path := h.currentPath()
	f, err := t.openFile(path)
	if err != nil {
		h.wantOpen = false
		return false
	}
	fi, err := f.Stat()
	k, ok := fileKey{}, false
	if err == nil {
		k, ok = statKey(fi)
	}
	if !ok || k != h.fileKey() {
		// The path holds another file now; the next scan will follow it,
		// and look for this one by identity.
		f.Close()
		h.wantOpen = false
		t.scanDue = true
		return false
	}
	replaced := false
	if h.fpLen > 0 {
		n, fp, err := fingerprint(f, h.fpLen)
		replaced = err != nil || n != h.fpLen || fp != h.fpHash
	}
	if replaced || fi.Size() < h.readPos {
		f.Close()
		if h.drain {
			// A file being finished changed under us: nothing left to finish.
			t.logger.Warn("file changed before it was finished; its unread rest is lost", "path", path, "offset", h.readPos)
			h.wantOpen = false
			return false
		}
		kind := "truncate"
		if replaced {
			kind = "replaced"
		}
		t.metrics.rotations.WithLabelValues(kind).Inc()
		t.rotateOver(h, path, k, fi.Size())
		return false
	}
	if _, err := f.Seek(h.readPos, io.SeekStart); err != nil {
		f.Close()
		return false
	}
	h.file = f
	h.wantOpen = false
	h.lastData = time.Now()
	h.atEOF = false
	t.open++
	t.metrics.filesOpen.Set(float64(t.open))
	return true
}

// evict closes an open file (other than keep) to stay under
// max_open_files: one read to EOF if any, idle longest first, because a
// closed file that is deleted before it is reopened loses its unread rest.
// It is reopened later by identity and offset.
func (t *Tailer) evict(keep *harvester) bool {
	var victim *harvester
	better := func(h, than *harvester) bool {
		if h.atEOF != than.atEOF {
			return h.atEOF
		}
		return h.lastData.Before(than.lastData)
	}
	for _, h := range t.files {
		if h == keep || h.file == nil {
			continue
		}
		if victim == nil || better(h, victim) {
			victim = h
		}
	}
	if victim == nil {
		return false
	}
	t.closeFile(victim)
	// A file with unread data is reopened when a slot frees; one at EOF
	// waits until a write event or a scan shows it grew. One that left the
	// globs is found again by identity.
	switch {
	case victim.atEOF:
	case !victim.gone || victim.drain:
		victim.wantOpen = true
	default:
		t.findGone(victim, t.busyKeys())
	}
	return true
}

// replace starts h's file over under a new identity, keeping its open
// descriptor: used when the file was truncated or its content replaced.
func (t *Tailer) replace(h *harvester) {
	f := h.file
	h.file = nil
	t.open--
	fi, err := f.Stat()
	var size int64
	if err == nil {
		size = fi.Size()
	}
	nh := t.rotateOver(h, h.currentPath(), h.fileKey(), size)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		t.metrics.filesOpen.Set(float64(t.open))
		return
	}
	nh.file = f
	nh.wantOpen = false
	t.open++
	t.metrics.filesOpen.Set(float64(t.open))
}

// rotateOver gives h's file (truncated, or its content replaced) a new
// identity read from offset 0, and persists it before anything ships. When
// a copy of the old content with bytes after h's checkpoint sits beside it
// (copytruncate), h finishes that copy first; otherwise h is retired and
// its unread rest, if any, is lost with the old content.
func (t *Tailer) rotateOver(h *harvester, path string, k fileKey, size int64) *harvester {
	nh := t.newHarvester(newFileID(), h.source, found{path: path, key: k, size: size}, 0, time.Now())
	if t.finishFromCopy(h) {
		nh.pred = h
		t.mu.Lock()
		t.files = append(t.files, nh)
		t.mu.Unlock()
	} else {
		h.resetLine()
		t.mu.Lock()
		h.retired, h.gone, h.drain = true, true, false
		for i, x := range t.files {
			if x == h {
				t.files[i] = nh
			}
		}
		t.retiredFiles = append(t.retiredFiles, h) // its acks still count (audit.go)
		t.mu.Unlock()
	}
	if err := t.persist(); err != nil {
		t.logger.Error("writing registry", "err", err)
	}
	return nh
}

// forget moves drained, gone files into the dormant registry entries, where
// they can be resumed if they reappear and are dropped after forget_after.
func (t *Tailer) forget(drop []*harvester, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.files[:0]
	for _, h := range t.files {
		if !contains(drop, h) {
			kept = append(kept, h)
			continue
		}
		h.mu.Lock()
		t.foldLocked(h) // its counts outlive it in the ledger
		if !h.retired {
			e := h.entryLocked()
			t.dormant[e.ID] = e
		}
		h.mu.Unlock()
	}
	clear(t.files[len(kept):])
	t.files = kept
}

func contains(hs []*harvester, h *harvester) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// watchDirs adds fsnotify watches for directories not yet watched.
func (t *Tailer) watchDirs(dirs map[string]bool) {
	if t.watcher == nil {
		return
	}
	for d := range dirs {
		if t.watched[d] {
			continue
		}
		if err := t.watcher.Add(d); err != nil {
			t.logger.Debug("cannot watch directory", "dir", d, "err", err)
			continue
		}
		t.watched[d] = true
	}
	// A deleted directory loses its watch; forget it so it is re-added.
	for d := range t.watched {
		if !dirs[d] {
			if _, err := os.Stat(d); err != nil {
				delete(t.watched, d)
			}
		}
	}
}
