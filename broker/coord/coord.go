// Package coord defines millrace's coordination store: a small znode-style
// interface in the shape of ZooKeeper's (persistent, ephemeral and sequential
// nodes; versioned compare-and-set; one-shot watches; atomic multi-ops; sessions).
//
// All cluster logic — broker registration, controller election, topic and
// partition state, consumer-group offsets — is written once against Store. Two
// backends implement it: a real ZooKeeper ensemble (package coord/zk) and an
// in-process store persisted to the data directory (package coord/embedded) for
// a single-machine appliance with no outside service.
//
// Paths follow ZooKeeper's rules: absolute, '/'-separated, no trailing slash
// (except the root "/"), no empty, "." or ".." components.
package coord

import (
	"errors"
	"strconv"
	"time"
)

// AnyVersion matches any node version in Set, Delete and CheckOp.
const AnyVersion int32 = -1

// Errors returned by every backend. Backends wrap them with the path involved,
// so callers test with errors.Is.
var (
	ErrNoNode          = errors.New("coord: node does not exist")
	ErrNodeExists      = errors.New("coord: node already exists")
	ErrBadVersion      = errors.New("coord: version does not match")
	ErrNotEmpty        = errors.New("coord: node has children")
	ErrEphemeralParent = errors.New("coord: ephemeral nodes cannot have children")
	ErrBadPath         = errors.New("coord: invalid path")
	ErrSessionExpired  = errors.New("coord: session expired")
	ErrClosed          = errors.New("coord: store closed")
)

// CreateMode selects the kind of node Create makes.
type CreateMode int

const (
	// Persistent nodes live until deleted.
	Persistent CreateMode = iota
	// Ephemeral nodes are deleted when the session that created them ends.
	Ephemeral
	// PersistentSequential nodes get a ten-digit, zero-padded, monotonically
	// increasing suffix appended to their name by the parent.
	PersistentSequential
	// EphemeralSequential combines Ephemeral and PersistentSequential.
	EphemeralSequential
)

// Stat describes a node, as ZooKeeper's Stat does.
type Stat struct {
	Version        int32 // bumped by every Set of the node's data
	ChildVersion   int32 // bumped by every create or delete of a child
	NumChildren    int32
	EphemeralOwner int64 // session ID of the owner, 0 for persistent nodes
	Created        time.Time
	Modified       time.Time
}

// EventType says what a watch fired for.
type EventType int

const (
	EventCreated EventType = iota + 1
	EventDeleted
	EventDataChanged
	EventChildrenChanged
	// EventNotWatching is delivered when the watch can no longer fire because
	// the session ended or the store was closed; the caller should re-read.
	EventNotWatching
)

// Event is delivered once on a watch channel, which is then closed.
type Event struct {
	Type EventType
	Path string
}

// SessionState is a change in the client's session, delivered on
// Store.SessionEvents.
type SessionState int

const (
	// SessionConnected: the session is (again) usable.
	SessionConnected SessionState = iota + 1
	// SessionDisconnected: the connection is lost; the session may still be
	// alive on the server, so ephemerals may still exist. Act cautiously.
	SessionDisconnected
	// SessionExpired: the session ended and its ephemerals are gone. The
	// backend establishes a new session and reports SessionConnected; the
	// owner must re-create its ephemerals and re-arm its watches.
	SessionExpired
)

// Store is one client session on a coordination store. All methods are safe for
// concurrent use. Watch channels receive exactly one Event and are then closed.
type Store interface {
	// Create makes a node and returns its path (which differs from path for
	// sequential modes). The parent must exist.
	Create(path string, data []byte, mode CreateMode) (string, error)
	// Get returns a node's data and stat.
	Get(path string) ([]byte, Stat, error)
	// GetW is Get plus a watch that fires on the node's next data change or
	// deletion.
	GetW(path string) ([]byte, Stat, <-chan Event, error)
	// Exists reports whether the node exists, with its stat when it does.
	Exists(path string) (bool, Stat, error)
	// ExistsW is Exists plus a watch that fires on creation, data change or
	// deletion of the node.
	ExistsW(path string) (bool, Stat, <-chan Event, error)
	// Set replaces a node's data if its version equals version (or version is
	// AnyVersion), returning the new stat; otherwise ErrBadVersion.
	Set(path string, data []byte, version int32) (Stat, error)
	// Delete removes a childless node if its version matches.
	Delete(path string, version int32) error
	// Children lists the names (not paths) of a node's children, sorted.
	Children(path string) ([]string, error)
	// ChildrenW is Children plus a watch that fires when a child is created or
	// deleted, or the node itself is deleted.
	ChildrenW(path string) ([]string, <-chan Event, error)
	// Multi applies ops atomically: all succeed or none is applied. On failure
	// the error wraps the failing op's error and is a *MultiError.
	Multi(ops ...Op) error
	// SessionID identifies the current session (the owner of its ephemerals).
	SessionID() int64
	// SessionEvents delivers session state changes. The channel is closed by
	// Close.
	SessionEvents() <-chan SessionState
	// Close ends the session, deleting its ephemeral nodes.
	Close() error
}

// Op is one operation of a Multi: CreateOp, SetOp, DeleteOp or CheckOp.
type Op interface{ isOp() }

// CreateOp creates a node (see Store.Create).
type CreateOp struct {
	Path string
	Data []byte
	Mode CreateMode
}

// SetOp sets a node's data if its version matches (see Store.Set).
type SetOp struct {
	Path    string
	Data    []byte
	Version int32
}

// DeleteOp deletes a node if its version matches (see Store.Delete).
type DeleteOp struct {
	Path    string
	Version int32
}

// CheckOp fails the Multi unless the node exists with the given version.
type CheckOp struct {
	Path    string
	Version int32
}

func (CreateOp) isOp() {}
func (SetOp) isOp()    {}
func (DeleteOp) isOp() {}
func (CheckOp) isOp()  {}

// MultiError reports which op of a Multi failed and why.
type MultiError struct {
	Index int   // index of the failing op
	Err   error // one of the Err* values, possibly wrapped
}

func (e *MultiError) Error() string {
	return "coord: multi op " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// Unwrap lets errors.Is see the failing op's error.
func (e *MultiError) Unwrap() error { return e.Err }
