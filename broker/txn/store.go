package txn

import (
	"encoding/json"
	"errors"
	"fmt"

	"millrace/broker/coord"
)

// Store layout (docs/architecture.md §4):
//
//	/transactions                      persistent, empty
//	/transactions/<escaped id>         persistent: the ID's Metadata JSON
//
// Every write is a compare-and-set on the node's version, so a coordinator
// that lost the ID to another broker cannot overwrite what the new one
// wrote. The version the decision (Prepare*) was written at is the
// transaction's coordinator epoch.
const transactionsRoot = "/transactions"

// errConflict is a compare-and-set lost to another writer: this broker's
// view of the ID is stale (another broker coordinates it now).
var errConflict = errors.New("the transaction's state changed under this coordinator")

// path is the node of transactional ID id.
func path(id string) string { return transactionsRoot + "/" + coord.EscapeName(id) }

// load reads id's metadata and the node's version; found is false when the
// ID has none.
func load(store coord.Store, id string) (m Metadata, version int32, found bool, err error) {
	data, stat, err := store.Get(path(id))
	if errors.Is(err, coord.ErrNoNode) {
		return Metadata{}, -1, false, nil
	}
	if err != nil {
		return Metadata{}, -1, false, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Metadata{}, -1, false, fmt.Errorf("transactional ID %q: stored state: %w", id, err)
	}
	if m.Version != metadataVersion {
		return Metadata{}, -1, false, fmt.Errorf("transactional ID %q: stored state has format version %d, this broker reads %d", id, m.Version, metadataVersion)
	}
	if m.Partitions == nil {
		m.Partitions = map[string][]int32{}
	}
	return m, stat.Version, true, nil
}

// save writes m over the node at version (-1: create it), returning the
// new version; errConflict when another writer came first.
func save(store coord.Store, m Metadata, version int32) (int32, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return -1, err
	}
	if version < 0 {
		_, err := store.Create(path(m.TransactionalID), data, coord.Persistent)
		if errors.Is(err, coord.ErrNodeExists) {
			return -1, errConflict
		}
		return 0, err
	}
	stat, err := store.Set(path(m.TransactionalID), data, version)
	if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNoNode) {
		return -1, errConflict
	}
	if err != nil {
		return -1, err
	}
	return stat.Version, nil
}

// remove deletes the node at version; errConflict when it changed.
func remove(store coord.Store, id string, version int32) error {
	err := store.Delete(path(id), version)
	if errors.Is(err, coord.ErrBadVersion) {
		return errConflict
	}
	if errors.Is(err, coord.ErrNoNode) {
		return nil
	}
	return err
}

// ensureRoot creates /transactions if it is missing.
func ensureRoot(store coord.Store) error {
	if _, err := store.Create(transactionsRoot, nil, coord.Persistent); err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return err
	}
	return nil
}
