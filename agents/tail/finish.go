package tail

import (
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Finishing files that left the globs.
//
// A rotation can move a file's unread rest out of reach of the globs: a
// rename to a name the globs do not match (app.log → app.log.1 with glob
// *.log), or copytruncate, where the rest sits in a copy the user excludes
// (app.log.1, app.log.ct) and the original starts over. Reading those
// bytes under the file's old identity keeps both promises: nothing is
// lost, and a line read again after a crash has the same event id, since
// it sits at the same offset of the same identity.
//
// The file is looked up by identity in the directory it was last seen in:
// first the same device and inode with the same first bytes (a rename),
// then another inode whose first bytes match the fingerprint and which is
// at least as long as the checkpoint (a copy). Excluded files are looked
// at too: exclude says which files are new sources, not where a known
// file's lines may be finished. Such a file is "drained": read to EOF,
// closed after close_inactive, and forgotten.

// listDir returns the regular files directly in dir, sorted by name.
func listDir(dir string) []found {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []found
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed since the listing
		}
		k, ok := statKey(fi)
		if !ok {
			continue
		}
		out = append(out, found{path: filepath.Join(dir, e.Name()), key: k, size: fi.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// identity is what locate needs to recognise a file.
type identity struct {
	key    fileKey
	fpLen  int
	fpHash string
	offset int64 // bytes already read or acknowledged; the file must have more
}

// locate finds id among files (a listing of its directory), skipping files
// in busy (followed under other identities). It returns the file and
// whether it has bytes after id.offset. A same-inode match wins over a copy.
func locate(files []found, id identity, busy map[fileKey]bool) (found, bool) {
	for _, f := range files {
		if f.key == id.key && fingerprintAt(f.path, id.fpLen, id.fpHash, false) {
			// The file itself: it has more to read, or nothing does.
			return f, f.size > id.offset
		}
	}
	if id.fpLen == 0 {
		// An empty prefix matches every file: no way to recognise a copy.
		return found{}, false
	}
	for _, f := range files {
		if f.key == id.key || busy[f.key] || f.size <= id.offset || f.size < int64(id.fpLen) {
			continue
		}
		if fingerprintAt(f.path, id.fpLen, id.fpHash, false) {
			return f, true
		}
	}
	return found{}, false
}

// fingerprintAt reports whether the first n bytes of the file at path hash
// to want (n == 0 matches any file). follow allows a symlink at path.
func fingerprintAt(path string, n int, want string, follow bool) bool {
	if n == 0 {
		return true
	}
	f, err := openRead(path, follow)
	if err != nil {
		return false
	}
	defer f.Close()
	got, fp, err := fingerprint(f, n)
	return err == nil && got == n && fp == want
}

// busyKeys are the files followed under some identity right now.
func (t *Tailer) busyKeys() map[fileKey]bool {
	m := make(map[fileKey]bool, len(t.files))
	for _, h := range t.files {
		if !h.retired {
			m[h.fileKey()] = true
		}
	}
	return m
}

// drainAt points h at f, out of the globs, to be read to EOF from its
// position and then forgotten.
func (t *Tailer) drainAt(h *harvester, f found, why string) {
	t.logger.Info("finishing file outside the globs", "source", h.source, "path", f.path, "offset", h.readPos, "size", f.size, "why", why)
	h.mu.Lock()
	h.path, h.dev, h.ino, h.size = f.path, f.key.dev, f.key.ino, f.size
	h.mu.Unlock()
	h.gone, h.drain, h.wantOpen, h.atEOF = true, true, true, false
}

// findGone looks up, by identity, a closed file that left the globs with
// bytes unread (renamed away while closed at EOF or evicted). It reports
// whether the file will be drained.
func (t *Tailer) findGone(h *harvester, busy map[fileKey]bool) bool {
	h.mu.Lock()
	dir, fpLen, fpHash := filepath.Dir(h.path), h.fpLen, h.fpHash
	h.mu.Unlock()
	f, ok := locate(listDir(dir), identity{key: h.fileKey(), fpLen: fpLen, fpHash: fpHash, offset: h.readPos}, busy)
	if !ok {
		return false
	}
	t.drainAt(h, f, "renamed away")
	return true
}

// finishFromCopy handles h's file being truncated or replaced: when a copy
// of the old content sits in the directory (copytruncate) with bytes after
// h's checkpoint, h moves onto the copy to finish them. It reports whether
// it did; h's descriptor, if any, is closed either way by the caller's swap.
//
// The checkpoint, not the read position: a copy holding nothing unread
// still holds the lines not yet acknowledged. Following it keeps h in the
// registry until they are, so a crash meanwhile ships them again from the
// copy instead of losing them.
func (t *Tailer) finishFromCopy(h *harvester) bool {
	h.mu.Lock()
	dir, fpLen, fpHash, checkpoint := filepath.Dir(h.path), h.fpLen, h.fpHash, h.checkpointLocked()
	h.mu.Unlock()
	if fpLen == 0 {
		return false
	}
	busy := t.busyKeys()
	busy[h.fileKey()] = true // the truncated original is not a copy of itself
	f, ok := locate(listDir(dir), identity{key: fileKey{}, fpLen: fpLen, fpHash: fpHash, offset: checkpoint}, busy)
	if !ok {
		return false
	}
	t.drainAt(h, f, "copytruncate")
	return true
}

// resumeDormant runs once after the first scan: registry entries no glob
// matched are looked up by identity in their directory and, when they
// have bytes after their checkpoint, read to EOF under their identity.
// Entries whose file was truncated or replaced while the tailer was down
// (stale) are looked for as copies; unresolved stale entries are dropped.
func (t *Tailer) resumeDormant(stale map[string]RegistryEntry, now time.Time) {
	t.mu.Lock()
	byDir := map[string][]RegistryEntry{}
	for _, e := range t.dormant {
		byDir[filepath.Dir(e.Path)] = append(byDir[filepath.Dir(e.Path)], e)
	}
	t.mu.Unlock()
	for _, e := range stale {
		byDir[filepath.Dir(e.Path)] = append(byDir[filepath.Dir(e.Path)], e)
	}
	busy := t.busyKeys()
	var resumed []*harvester
	for dir, entries := range byDir {
		files := listDir(dir)
		for _, e := range entries {
			id := identity{key: fileKey{e.Device, e.Inode}, fpLen: e.FingerprintLen, fpHash: e.Fingerprint, offset: e.Offset}
			if _, isStale := stale[e.ID]; isStale {
				id.key = fileKey{} // the inode holds other content now: only a copy can match
			}
			f, ok := locate(files, id, busy)
			if !ok {
				continue
			}
			busy[f.key] = true
			h := t.newHarvester(e.ID, e.Source, f, e.Offset, now)
			h.fpLen, h.fpHash = e.FingerprintLen, e.Fingerprint
			t.drainAt(h, f, "left the globs while stopped")
			resumed = append(resumed, h)
		}
	}
	t.mu.Lock()
	for _, h := range resumed {
		delete(t.dormant, h.id)
		t.files = append(t.files, h)
	}
	t.mu.Unlock()
}
