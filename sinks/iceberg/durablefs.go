package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	iceio "github.com/apache/iceberg-go/io"

	"millrace/internal/durable"
)

// durableFS is iceberg-go's local file IO with its writes made durable
// before they are reported done: a file is fsynced before its Close
// returns, and so is the directory that holds its name (and every
// directory created for it). iceberg-go's own LocalFS does neither, yet the
// catalog's commit, which is synced, points at the metadata file, manifest
// list and manifests it has just written: after a power cut the catalog
// could name a metadata file that never reached the disk, and the table
// would not load. The sink's data files are synced by its store already.
type durableFS struct{ iceio.LocalFS }

// useDurableFS makes durableFS the IO of file:// (and scheme-less)
// locations, for every table this process opens. iceberg-go chooses a
// table's IO from a process-wide registry by the location's scheme, so
// the replacement is process-wide too; Open does it once, before any table
// is loaded.
var useDurableFS = sync.OnceFunc(func() {
	factory := func(context.Context, *url.URL, map[string]string) (iceio.IO, error) { return durableFS{}, nil }
	for _, scheme := range []string{"file", ""} {
		iceio.Unregister(scheme)
		iceio.Register(scheme, factory)
	}
})

// Create creates name, its directories durably, and returns a writer that
// syncs the file and its directory on Close.
func (d durableFS) Create(name string) (iceio.FileWriter, error) {
	path, err := d.path(name)
	if err != nil {
		return nil, err
	}
	if err := mkdirAll(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return syncedFile{f}, nil
}

// WriteFile writes p to name durably.
func (d durableFS) WriteFile(name string, p []byte) error {
	w, err := d.Create(name)
	if err != nil {
		return err
	}
	_, err = w.Write(p)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// path is the local path of name: a file:// URL (with no host, or
// localhost) or a path, as the locations the sink gives its tables are.
func (durableFS) path(name string) (string, error) {
	if !strings.HasPrefix(name, "file:") {
		return name, nil
	}
	u, err := url.Parse(name)
	if err != nil {
		return "", fmt.Errorf("iceberg: local file %q: %w", name, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("iceberg: local file %q: a file URL names no host", name)
	}
	return filepath.FromSlash(u.Path), nil
}

// mkdirAll creates dir and its missing parents, syncing the parent of each
// directory it creates so the new entries survive a power cut.
func mkdirAll(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := durable.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// syncedFile is a file created by durableFS.
type syncedFile struct{ *os.File }

// Close syncs the file, closes it and syncs its directory.
func (f syncedFile) Close() error {
	err := f.File.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(f.Name()))
}
