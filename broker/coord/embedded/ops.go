package embedded

import (
	"fmt"

	"millrace/broker/coord"
)

// The checked operations below validate a request against the tree as
// ZooKeeper does, apply it through the tree's primitives, and record the
// primitive (for the WAL), the change (for watches) and its undo (for a failing
// Multi) in tx. The caller holds the Server's mutex.

// createLocked creates a node; for sequential modes the name gets, as a
// ten-digit suffix, the number of children the parent has ever had created,
// which is ZooKeeper's counter (deletes do not move it).
func (s *Server) createLocked(tx *txn, path string, data []byte, mode coord.CreateMode, owner, now int64) (string, error) {
	if mode < coord.Persistent || mode > coord.EphemeralSequential {
		return "", fmt.Errorf("%w: unknown create mode %d for %s", coord.ErrBadPath, mode, path)
	}
	if err := coord.ValidateCreatePath(path, mode); err != nil {
		return "", err
	}
	if mode == coord.PersistentSequential || mode == coord.EphemeralSequential {
		parentPath := coord.ParentPath(path)
		parent, ok := s.tree.nodes[parentPath]
		if !ok {
			return "", fmt.Errorf("%w: %s", coord.ErrNoNode, parentPath)
		}
		path = fmt.Sprintf("%s%010d", path, parent.seq)
	}
	if mode == coord.Persistent || mode == coord.PersistentSequential {
		owner = 0
	}
	undo, err := s.tree.create(path, data, owner, now)
	if err != nil {
		return "", err
	}
	tx.undo = append(tx.undo, undo)
	tx.ops = append(tx.ops, walOp{kind: opCreate, path: path, data: data, owner: owner, time: now})
	tx.changes = append(tx.changes, change{kind: opCreate, path: path})
	return path, nil
}

// versionLocked finds a node and checks its version.
func (s *Server) versionLocked(path string, version int32) (*node, error) {
	if err := coord.ValidatePath(path); err != nil {
		return nil, err
	}
	n, ok := s.tree.nodes[path]
	if !ok {
		return nil, fmt.Errorf("%w: %s", coord.ErrNoNode, path)
	}
	if version != coord.AnyVersion && version != n.version {
		return nil, fmt.Errorf("%w: %s is at version %d, not %d", coord.ErrBadVersion, path, n.version, version)
	}
	return n, nil
}

// setLocked replaces a node's data if the version matches.
func (s *Server) setLocked(tx *txn, path string, data []byte, version int32, now int64) (coord.Stat, error) {
	n, err := s.versionLocked(path, version)
	if err != nil {
		return coord.Stat{}, err
	}
	undo, err := s.tree.set(path, data, now)
	if err != nil {
		return coord.Stat{}, err
	}
	tx.undo = append(tx.undo, undo)
	tx.ops = append(tx.ops, walOp{kind: opSet, path: path, data: data, time: now})
	tx.changes = append(tx.changes, change{kind: opSet, path: path})
	return n.stat(), nil
}

// deleteLocked removes a childless node if the version matches.
func (s *Server) deleteLocked(tx *txn, path string, version int32) error {
	if _, err := s.versionLocked(path, version); err != nil {
		return err
	}
	undo, err := s.tree.remove(path)
	if err != nil {
		return err
	}
	tx.undo = append(tx.undo, undo)
	tx.ops = append(tx.ops, walOp{kind: opDelete, path: path})
	tx.changes = append(tx.changes, change{kind: opDelete, path: path})
	return nil
}

// checkVersionLocked is Multi's CheckOp.
func (s *Server) checkVersionLocked(path string, version int32) error {
	_, err := s.versionLocked(path, version)
	return err
}
