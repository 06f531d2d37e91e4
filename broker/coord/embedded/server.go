// Package embedded is millrace's in-process coordination store: the
// coord.Store semantics of ZooKeeper (sessions, ephemeral and sequential
// nodes, versioned compare-and-set, one-shot watches, atomic multi-ops) for a
// single-machine appliance with no outside service, persisted in a directory.
//
// Every mutation is one transaction appended to a write-ahead log and fsynced
// before the call returns; concurrent mutations share an fsync (group commit).
// When the log grows past a threshold the tree is written to a snapshot and the
// log is reset. Open replays snapshot then log, cutting off a torn tail, and
// deletes the ephemerals of the sessions that died with the previous process.
package embedded

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"millrace/broker/coord"
	"millrace/internal/durable"
)

// DefaultSnapshotBytes is the WAL size past which the tree is snapshotted and
// the WAL reset.
const DefaultSnapshotBytes = 64 << 20

// Options tune a Server. The zero value of each field selects its default.
type Options struct {
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
	// SnapshotBytes is the WAL size that triggers a snapshot; default
	// DefaultSnapshotBytes.
	SnapshotBytes int64
}

// Server is an embedded coordination store. Clients use it through sessions
// (Session); several sessions behave like several ZooKeeper clients.
type Server struct {
	dir           string
	logger        *slog.Logger
	snapshotBytes int64
	lock          *os.File // flock'ed LOCK file
	wal           logFile  // owned by the committer goroutine after Open

	kick chan struct{} // a batch is pending (capacity 1)
	quit chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu          sync.Mutex // guards the following
	tree        *tree
	watches     *watches
	sessions    map[*session]struct{}
	zxid        int64  // last transaction applied
	lastSession int64  // highest session ID handed out
	walSize     int64  // bytes in the WAL, including pending batches
	pending     *batch // transactions waiting for the committer
	failed      error  // sticky: a WAL write or fsync failed; cleared by retryPersist
	closed      bool
}

// logFile is the WAL file as the Server uses it; tests substitute one that
// fails writes or fsyncs.
type logFile interface {
	io.Reader
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	Truncate(size int64) error
	Sync() error
}

// batch is a group of transactions made durable by one write and fsync.
type batch struct {
	buf  []byte
	done chan struct{} // closed once err is set
	err  error
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// Open opens (creating if needed) the store in dir.
func Open(dir string, logger *slog.Logger) (*Server, error) {
	return OpenOptions(dir, Options{Logger: logger})
}

// OpenOptions is Open with tuning options.
func OpenOptions(dir string, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SnapshotBytes <= 0 {
		opts.SnapshotBytes = DefaultSnapshotBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("embedded: lock %s: %w", dir, err)
	}
	s := &Server{
		dir:           dir,
		logger:        opts.Logger.With("component", "coord-embedded"),
		snapshotBytes: opts.SnapshotBytes,
		lock:          lock,
		kick:          make(chan struct{}, 1),
		quit:          make(chan struct{}),
		watches:       newWatches(),
		sessions:      map[*session]struct{}{},
		pending:       newBatch(),
	}
	if err := s.recover(); err != nil {
		if s.wal != nil {
			s.wal.Close()
		}
		lock.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.commitLoop()
	return s, nil
}

// recover loads the snapshot and WAL, drops the dead sessions' ephemerals, and
// compacts everything into a fresh snapshot with an empty WAL, so every run
// starts from one file.
func (s *Server) recover() error {
	start := time.Now()
	s.tree = newTree()
	content, err := os.ReadFile(filepath.Join(s.dir, snapshotFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("embedded: read snapshot: %w", err)
	default:
		if s.tree, s.zxid, s.lastSession, err = decodeSnapshot(content); err != nil {
			return fmt.Errorf("embedded: %s: %w", filepath.Join(s.dir, snapshotFile), err)
		}
	}
	snapshotZxid := s.zxid

	wal, err := os.OpenFile(filepath.Join(s.dir, walFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("embedded: open wal: %w", err)
	}
	s.wal = wal
	replayed, err := s.replayWAL(snapshotZxid)
	if err != nil {
		return err
	}

	// The sessions of the previous process are gone; so are their ephemerals.
	ephemerals := s.tree.ephemerals(0)
	for _, path := range ephemerals {
		if _, err := s.tree.remove(path); err != nil {
			return fmt.Errorf("embedded: drop ephemeral: %w", err)
		}
	}
	s.zxid++
	if err := s.writeSnapshot(s.tree.encodeSnapshot(s.zxid, s.lastSession)); err != nil {
		return err
	}
	if err := s.resetWAL(); err != nil {
		return err
	}
	s.logger.Info("coordination store opened", "dir", s.dir, "nodes", len(s.tree.nodes),
		"replayed", replayed, "dropped_ephemerals", len(ephemerals), "took", time.Since(start))
	return nil
}

// replayWAL applies the WAL's transactions newer than the snapshot and returns
// how many it applied. A torn or corrupt tail is cut off: the transaction in it
// never returned to its caller, since a call returns only after the fsync.
func (s *Server) replayWAL(snapshotZxid int64) (int, error) {
	content, err := io.ReadAll(s.wal)
	if err != nil {
		return 0, fmt.Errorf("embedded: read wal: %w", err)
	}
	if len(content) < len(walMagic) || !bytes.HasPrefix(content, []byte(walMagic)) {
		if len(content) > 0 && !bytes.HasPrefix([]byte(walMagic), content) {
			return 0, fmt.Errorf("embedded: %s: %w: bad magic", walFile, errCorrupt)
		}
		// Empty, or torn while writing the header: nothing was ever logged.
		return 0, nil
	}
	r := bytes.NewReader(content[len(walMagic):])
	replayed := 0
	for {
		offset := int64(len(content)) - int64(r.Len())
		payload, err := readFrame(r)
		if err == io.EOF {
			return replayed, nil
		}
		var zxid int64
		var ops []walOp
		if err == nil {
			zxid, ops, err = decodeTxn(payload)
		}
		if err != nil {
			s.logger.Warn("cutting torn wal tail", "offset", offset, "dropped_bytes", int64(len(content))-offset, "reason", err)
			return replayed, nil
		}
		if zxid <= snapshotZxid {
			continue // already in the snapshot
		}
		for _, op := range ops {
			if op.kind == opSession {
				s.lastSession = max(s.lastSession, op.owner)
				continue
			}
			if err := s.tree.apply(op); err != nil {
				return replayed, fmt.Errorf("embedded: %s: %w: transaction %d does not apply: %v", walFile, errCorrupt, zxid, err)
			}
		}
		s.zxid = zxid
		replayed++
	}
}

// writeSnapshot publishes a snapshot atomically: temp file, fsync, rename,
// fsync the directory.
func (s *Server) writeSnapshot(content []byte) error {
	if err := durable.WriteFile(filepath.Join(s.dir, snapshotFile), content); err != nil {
		return fmt.Errorf("embedded: snapshot: %w", err)
	}
	return nil
}

// resetWAL empties the WAL down to its magic. Called only after a snapshot
// covering every logged transaction is durable; a crash midway leaves records
// the snapshot already holds, which replay skips by zxid.
func (s *Server) resetWAL() error {
	err := s.wal.Truncate(0)
	if err == nil {
		_, err = s.wal.WriteAt([]byte(walMagic), 0)
	}
	if err == nil {
		_, err = s.wal.Seek(int64(len(walMagic)), io.SeekStart)
	}
	if err == nil {
		err = s.wal.Sync()
	}
	if err == nil {
		err = durable.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("embedded: reset wal: %w", err)
	}
	s.walSize = int64(len(walMagic))
	return nil
}

// commitLoop is the group committer: it takes whatever transactions are
// pending, writes them with one write and one fsync (or, past the size
// threshold, folds them into a snapshot), and releases their callers.
func (s *Server) commitLoop() {
	defer s.wg.Done()
	retry := time.NewTicker(PersistRetryInterval)
	defer retry.Stop()
	for {
		select {
		case <-s.kick:
		case <-retry.C:
			s.retryPersist()
			continue
		case <-s.quit:
			// Close set closed under the lock, so nothing is added after this.
			s.commitPending()
			return
		}
		s.commitPending()
	}
}

// PersistRetryInterval is how often a store that failed to persist tries
// again (retryPersist).
const PersistRetryInterval = 2 * time.Second

// retryPersist makes a store that failed to persist (a full or failing
// disk) durable again once the disk takes writes, without a reopen. The
// tree in memory holds every transaction applied, those whose write or
// fsync failed included (their callers got the error, but watchers saw
// them), so a snapshot of it covers everything and replaces the WAL, as
// the size threshold does: the snapshot is a new file, written, fsynced and
// renamed, so pages a failed fsync may have dropped from the WAL play no
// part. Until it succeeds mutations stay refused. It runs on the committer
// goroutine, so no batch is written meanwhile. Ephemerals of sessions that
// closed while the store refused stay until the next reopen drops them.
func (s *Server) retryPersist() {
	s.mu.Lock()
	if s.failed == nil || s.closed {
		s.mu.Unlock()
		return
	}
	b := s.pending
	s.pending = newBatch()
	snapshot := s.tree.encodeSnapshot(s.zxid, s.lastSession)
	cause := s.failed
	s.mu.Unlock()

	err := s.writeSnapshot(snapshot)
	if err == nil {
		err = s.resetWAL()
	}
	s.mu.Lock()
	if err == nil {
		s.failed = nil
	}
	b.err = s.failed
	s.mu.Unlock()
	close(b.done)
	if err == nil {
		s.logger.Warn("coordination store persists again after a failed write", "snapshot_bytes", len(snapshot), "cause", cause)
	}
}

func (s *Server) commitPending() {
	s.mu.Lock()
	b := s.pending
	if len(b.buf) == 0 {
		s.mu.Unlock()
		return
	}
	s.pending = newBatch()
	if s.failed != nil {
		// Writing after a failed write or fsync could put a later transaction
		// on disk without an earlier one; refuse instead.
		b.err = s.failed
		s.mu.Unlock()
		close(b.done)
		return
	}
	var snapshot []byte
	if s.walSize+int64(len(b.buf)) > s.snapshotBytes {
		// The tree already holds every transaction in b, so the snapshot
		// covers them: b need not reach the WAL at all.
		snapshot = s.tree.encodeSnapshot(s.zxid, s.lastSession)
	} else {
		s.walSize += int64(len(b.buf))
	}
	s.mu.Unlock()

	var err error
	if snapshot != nil {
		err = s.writeSnapshot(snapshot)
		if err == nil {
			err = s.resetWAL()
		}
		s.logger.Debug("coordination store snapshotted", "bytes", len(snapshot), "err", err)
	} else {
		_, err = s.wal.Write(b.buf)
		if err == nil {
			err = s.wal.Sync()
		}
	}
	if err != nil {
		err = fmt.Errorf("embedded: persist: %w", err)
		s.logger.Error("coordination store can no longer persist; it refuses changes until a retry succeeds", "err", err, "retry_every", PersistRetryInterval)
		s.mu.Lock()
		if s.failed == nil {
			s.failed = err
		}
		s.mu.Unlock()
	}
	b.err = err
	close(b.done)
}

// commitLocked logs a transaction and takes the watches it fires. The caller
// must release the lock, wait on the returned batch, then deliver.
func (s *Server) commitLocked(ops []walOp, changes []change) (*batch, []firing) {
	s.zxid++
	s.pending.buf = appendFrame(s.pending.buf, encodeTxn(s.zxid, ops))
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return s.pending, s.watches.trigger(changes)
}

// checkLocked reports why the store cannot take a mutation, if it cannot.
func (s *Server) checkLocked() error {
	if s.closed {
		return coord.ErrClosed
	}
	return s.failed
}

// Session opens a new client session.
func (s *Server) Session() (coord.Store, error) {
	s.mu.Lock()
	if err := s.checkLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.lastSession++
	c := newSession(s, s.lastSession)
	s.sessions[c] = struct{}{}
	b, _ := s.commitLocked([]walOp{{kind: opSession, owner: c.id}}, nil)
	s.mu.Unlock()
	<-b.done
	if b.err != nil {
		s.mu.Lock()
		c.closed = true
		delete(s.sessions, c)
		s.mu.Unlock()
		c.events.Stop()
		return nil, b.err
	}
	c.events.Push(coord.SessionConnected)
	return c, nil
}

// ExpireSession ends the session with the given ID as a ZooKeeper server would
// on a missed heartbeat: its ephemerals are deleted and its watches dropped
// (EventNotWatching), then the client sees SessionExpired followed by
// SessionConnected under a new session ID. It exists for tests of the layers
// above; an unknown ID is ignored.
func (s *Server) ExpireSession(id int64) {
	s.mu.Lock()
	var c *session
	for candidate := range s.sessions {
		if candidate.id == id {
			c = candidate
		}
	}
	if c == nil || s.checkLocked() != nil {
		s.mu.Unlock()
		return
	}
	ops, changes := s.dropEphemeralsLocked(id)
	s.lastSession++
	c.id = s.lastSession
	ops = append(ops, walOp{kind: opSession, owner: c.id})
	b, firings := s.commitLocked(ops, changes)
	firings = append(firings, s.watches.dropOwner(c)...)
	s.mu.Unlock()
	<-b.done
	deliver(firings)
	s.logger.Info("session expired", "session", id, "new_session", c.id)
	c.events.Push(coord.SessionExpired)
	c.events.Push(coord.SessionConnected)
}

// dropEphemeralsLocked deletes a session's ephemerals from the tree.
func (s *Server) dropEphemeralsLocked(owner int64) ([]walOp, []change) {
	var ops []walOp
	var changes []change
	for _, path := range s.tree.ephemerals(owner) {
		if _, err := s.tree.remove(path); err != nil {
			// Ephemerals have no children and their parents exist: this
			// cannot fail, but if it did the node simply stays.
			s.logger.Error("cannot delete ephemeral", "path", path, "err", err)
			continue
		}
		ops = append(ops, walOp{kind: opDelete, path: path})
		changes = append(changes, change{kind: opDelete, path: path})
	}
	return ops, changes
}

// Close closes every session (their watches see EventNotWatching), makes
// pending transactions durable, and releases the directory. Ephemerals are not
// deleted in the log: the next Open drops them. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	firings := s.watches.dropOwner(nil)
	sessions := s.sessions
	s.sessions = map[*session]struct{}{}
	for c := range sessions {
		c.closed = true
	}
	s.mu.Unlock()
	deliver(firings)
	for c := range sessions {
		c.events.Stop()
	}
	close(s.quit)
	s.wg.Wait()
	err := s.wal.Close()
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	s.logger.Info("coordination store closed", "dir", s.dir)
	return err
}
