package zk

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"millrace/broker/coord"
)

// openACL is every node's ACL: millrace's ensemble is trusted, as Kafka's
// ZooKeeper mode trusts its ensemble unless told otherwise.
var openACL = gozk.WorldACL(gozk.PermAll)

// Create implements coord.Store.
func (s *Store) Create(path string, data []byte, mode coord.CreateMode) (string, error) {
	if err := s.check("create", path, coord.ValidateCreatePath(path, mode)); err != nil {
		return "", err
	}
	flags, err := createFlags(mode)
	if err != nil {
		return "", fmt.Errorf("coord/zk: create %s: %w", path, err)
	}
	created, err := s.conn.Create(s.full(path, isSequential(mode)), data, flags, openACL)
	if err != nil {
		return "", s.wrap("create", path, err)
	}
	return s.relative(created), nil
}

// Get implements coord.Store.
func (s *Store) Get(path string) ([]byte, coord.Stat, error) {
	if err := s.check("get", path, coord.ValidatePath(path)); err != nil {
		return nil, coord.Stat{}, err
	}
	data, stat, err := s.conn.Get(s.full(path, false))
	if err != nil {
		return nil, coord.Stat{}, s.wrap("get", path, err)
	}
	return data, convertStat(stat), nil
}

// GetW implements coord.Store.
func (s *Store) GetW(path string) ([]byte, coord.Stat, <-chan coord.Event, error) {
	if err := s.check("get", path, coord.ValidatePath(path)); err != nil {
		return nil, coord.Stat{}, nil, err
	}
	data, stat, zch, err := s.conn.GetW(s.full(path, false))
	if err != nil {
		return nil, coord.Stat{}, nil, s.wrap("get", path, err)
	}
	ch, err := s.watch("get", path, zch)
	if err != nil {
		return nil, coord.Stat{}, nil, err
	}
	return data, convertStat(stat), ch, nil
}

// Exists implements coord.Store.
func (s *Store) Exists(path string) (bool, coord.Stat, error) {
	if err := s.check("exists", path, coord.ValidatePath(path)); err != nil {
		return false, coord.Stat{}, err
	}
	ok, stat, err := s.conn.Exists(s.full(path, false))
	if err != nil {
		return false, coord.Stat{}, s.wrap("exists", path, err)
	}
	if !ok {
		return false, coord.Stat{}, nil
	}
	return true, convertStat(stat), nil
}

// ExistsW implements coord.Store.
func (s *Store) ExistsW(path string) (bool, coord.Stat, <-chan coord.Event, error) {
	if err := s.check("exists", path, coord.ValidatePath(path)); err != nil {
		return false, coord.Stat{}, nil, err
	}
	ok, stat, zch, err := s.conn.ExistsW(s.full(path, false))
	if err != nil {
		return false, coord.Stat{}, nil, s.wrap("exists", path, err)
	}
	ch, err := s.watch("exists", path, zch)
	if err != nil {
		return false, coord.Stat{}, nil, err
	}
	if !ok {
		return false, coord.Stat{}, ch, nil
	}
	return true, convertStat(stat), ch, nil
}

// Set implements coord.Store.
func (s *Store) Set(path string, data []byte, version int32) (coord.Stat, error) {
	if err := s.check("set", path, coord.ValidatePath(path)); err != nil {
		return coord.Stat{}, err
	}
	stat, err := s.conn.Set(s.full(path, false), data, version)
	if err != nil {
		return coord.Stat{}, s.wrap("set", path, err)
	}
	return convertStat(stat), nil
}

// Delete implements coord.Store.
func (s *Store) Delete(path string, version int32) error {
	if err := s.check("delete", path, coord.ValidatePath(path)); err != nil {
		return err
	}
	if err := s.conn.Delete(s.full(path, false), version); err != nil {
		return s.wrap("delete", path, err)
	}
	return nil
}

// Children implements coord.Store.
func (s *Store) Children(path string) ([]string, error) {
	if err := s.check("children", path, coord.ValidatePath(path)); err != nil {
		return nil, err
	}
	names, _, err := s.conn.Children(s.full(path, false))
	if err != nil {
		return nil, s.wrap("children", path, err)
	}
	// ZooKeeper lists children in no particular order; coord promises sorted.
	slices.Sort(names)
	return names, nil
}

// ChildrenW implements coord.Store.
func (s *Store) ChildrenW(path string) ([]string, <-chan coord.Event, error) {
	if err := s.check("children", path, coord.ValidatePath(path)); err != nil {
		return nil, nil, err
	}
	names, _, zch, err := s.conn.ChildrenW(s.full(path, false))
	if err != nil {
		return nil, nil, s.wrap("children", path, err)
	}
	ch, err := s.watch("children", path, zch)
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(names)
	return names, ch, nil
}

// Multi implements coord.Store. The server applies the ops as one
// transaction; a failure names the first op that failed.
func (s *Store) Multi(ops ...coord.Op) error {
	if s.closed.Load() {
		return fmt.Errorf("coord/zk: multi: %w", errClosed())
	}
	if len(ops) == 0 {
		return nil
	}
	requests := make([]any, len(ops))
	paths := make([]string, len(ops))
	for i, op := range ops {
		var err error
		switch op := op.(type) {
		case coord.CreateOp:
			paths[i] = op.Path
			if err = coord.ValidateCreatePath(op.Path, op.Mode); err == nil {
				var flags int32
				if flags, err = createFlags(op.Mode); err == nil {
					requests[i] = &gozk.CreateRequest{Path: s.full(op.Path, isSequential(op.Mode)), Data: op.Data, Acl: openACL, Flags: flags}
				}
			}
		case coord.SetOp:
			paths[i] = op.Path
			if err = coord.ValidatePath(op.Path); err == nil {
				requests[i] = &gozk.SetDataRequest{Path: s.full(op.Path, false), Data: op.Data, Version: op.Version}
			}
		case coord.DeleteOp:
			paths[i] = op.Path
			if err = coord.ValidatePath(op.Path); err == nil {
				requests[i] = &gozk.DeleteRequest{Path: s.full(op.Path, false), Version: op.Version}
			}
		case coord.CheckOp:
			paths[i] = op.Path
			if err = coord.ValidatePath(op.Path); err == nil {
				requests[i] = &gozk.CheckVersionRequest{Path: s.full(op.Path, false), Version: op.Version}
			}
		default:
			err = fmt.Errorf("unknown op type %T", op)
		}
		if err != nil {
			return &coord.MultiError{Index: i, Err: fmt.Errorf("coord/zk: multi %s: %w", paths[i], err)}
		}
	}
	results, err := s.conn.Multi(requests...)
	if err == nil {
		return nil
	}
	// The op that failed carries its own error; the ones before it report
	// success and the ones after it a runtime inconsistency.
	for i, result := range results {
		if result.Error != nil && i < len(ops) {
			return &coord.MultiError{Index: i, Err: s.wrap("multi", paths[i], result.Error)}
		}
	}
	return s.wrap("multi", "", err)
}

// check turns a validation error and a closed store into the error to return.
func (s *Store) check(op, path string, invalid error) error {
	if s.closed.Load() {
		return fmt.Errorf("coord/zk: %s %s: %w", op, path, errClosed())
	}
	if invalid != nil {
		return fmt.Errorf("coord/zk: %s: %w", op, invalid)
	}
	return nil
}

// wrap maps a client error to a coord error and names the operation and path.
func (s *Store) wrap(op, path string, err error) error {
	mapped := mapError(err)
	if s.closed.Load() && errors.Is(mapped, ErrConnectionLoss) {
		// Close cut the operation off.
		mapped = errClosed()
	}
	if path == "" {
		return fmt.Errorf("coord/zk: %s: %w", op, mapped)
	}
	return fmt.Errorf("coord/zk: %s %s: %w", op, path, mapped)
}

func errClosed() error { return coord.ErrClosed }

// mapError translates the client's errors into coord's.
func mapError(err error) error {
	switch {
	case errors.Is(err, gozk.ErrNoNode):
		return coord.ErrNoNode
	case errors.Is(err, gozk.ErrNodeExists):
		return coord.ErrNodeExists
	case errors.Is(err, gozk.ErrBadVersion):
		return coord.ErrBadVersion
	case errors.Is(err, gozk.ErrNotEmpty):
		return coord.ErrNotEmpty
	case errors.Is(err, gozk.ErrNoChildrenForEphemerals):
		return coord.ErrEphemeralParent
	case errors.Is(err, gozk.ErrInvalidPath), errors.Is(err, gozk.ErrBadArguments):
		return fmt.Errorf("%w (%v)", coord.ErrBadPath, err)
	case errors.Is(err, gozk.ErrSessionExpired), errors.Is(err, gozk.ErrSessionMoved):
		return coord.ErrSessionExpired
	case errors.Is(err, gozk.ErrConnectionClosed), errors.Is(err, gozk.ErrNoServer),
		errors.Is(err, gozk.ErrClosing):
		return fmt.Errorf("%w (%v)", ErrConnectionLoss, err)
	}
	return err
}

// createFlags maps a create mode to ZooKeeper's flags.
func createFlags(mode coord.CreateMode) (int32, error) {
	switch mode {
	case coord.Persistent:
		return 0, nil
	case coord.Ephemeral:
		return gozk.FlagEphemeral, nil
	case coord.PersistentSequential:
		return gozk.FlagSequence, nil
	case coord.EphemeralSequential:
		return gozk.FlagEphemeral | gozk.FlagSequence, nil
	}
	return 0, fmt.Errorf("%w: unknown create mode %d", coord.ErrBadPath, mode)
}

func isSequential(mode coord.CreateMode) bool {
	return mode == coord.PersistentSequential || mode == coord.EphemeralSequential
}

// full maps a store path to the server's, inside the chroot. A sequential
// create of "/" names a child of the root, so it keeps its slash.
func (s *Store) full(path string, sequential bool) string {
	if s.chroot == "" {
		return path
	}
	if path == "/" && !sequential {
		return s.chroot
	}
	return s.chroot + path
}

// relative maps a server path back to the store's.
func (s *Store) relative(path string) string {
	if s.chroot == "" {
		return path
	}
	if path == s.chroot {
		return "/"
	}
	return strings.TrimPrefix(path, s.chroot)
}

// convertStat converts the client's stat.
func convertStat(stat *gozk.Stat) coord.Stat {
	if stat == nil {
		return coord.Stat{}
	}
	return coord.Stat{
		Version:        stat.Version,
		ChildVersion:   stat.Cversion,
		NumChildren:    stat.NumChildren,
		EphemeralOwner: stat.EphemeralOwner,
		Created:        time.UnixMilli(stat.Ctime),
		Modified:       time.UnixMilli(stat.Mtime),
	}
}
