// Package durable writes small files so that a crash leaves either the old
// content or the new, never a mix: checkpoints, registries, snapshots and
// identity files all go through WriteFile.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data: it writes path+".tmp", fsyncs it,
// renames it over path and fsyncs the directory, since the rename is only
// durable once the directory entry is. On error the temporary file is
// removed and path is untouched. One writer per path: the temporary name
// is fixed so that recovery code can recognise a leftover one.
func WriteFile(path string, data []byte) error {
	f, err := os.OpenFile(path+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // best effort: a stray temporary file is harmless
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, making the creations, renames and removals of
// its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
