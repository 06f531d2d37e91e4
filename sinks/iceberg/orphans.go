package iceberg

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// OrphanOptions says which unreferenced files RemoveOrphans deletes.
type OrphanOptions struct {
	// SafetyAge is how old an unreferenced file must be to be deleted: a
	// roll or a compaction commits its files well within it, so a younger
	// file may be about to be committed. Default 1 hour.
	SafetyAge time.Duration
	// DryRun lists the orphans without deleting them.
	DryRun bool
}

// OrphanResult is what RemoveOrphans found.
type OrphanResult struct {
	// Files are the orphans' locations (deleted unless DryRun).
	Files []string
	// Bytes is their total size.
	Bytes int64
}

// RemoveOrphans deletes the files under tbl's data location that no
// snapshot of the table references (the data and delete files of every
// snapshot of every ref, not only the current one) and that are older
// than SafetyAge: a zombie's files whose commit was refused, the output of
// a compaction that crashed or lost its race, a roll written before a
// crash. It reloads the table first, so the references are the newest the
// catalog has.
//
// A compaction names its output by its inputs, so one that runs again
// rewrites an old orphan under the same name and may commit it while the
// sweep runs. Each file's age is therefore checked again just before it
// is deleted: a rewritten file is young again and stays.
func (c *Catalog) RemoveOrphans(ctx context.Context, tbl *table.Table, opts OrphanOptions) (OrphanResult, error) {
	if opts.SafetyAge <= 0 {
		opts.SafetyAge = time.Hour
	}
	fresh, err := c.Reload(ctx, tbl)
	if err != nil {
		return OrphanResult{}, err
	}
	fs, err := fresh.FS(ctx)
	if err != nil {
		return OrphanResult{}, err
	}
	guard := &sweepGuard{fs: fs, cutoff: time.Now().Add(-opts.SafetyAge), kept: map[string]bool{}}
	res, err := fresh.DeleteOrphanFiles(ctx,
		table.WithLocation(dataLocation(fresh)),
		table.WithFilesOlderThan(opts.SafetyAge),
		table.WithDryRun(opts.DryRun),
		table.WithDeleteFunc(guard.remove))
	if errors.Is(err, iofs.ErrNotExist) {
		// A table no roll has landed in yet has no data directory on a
		// filesystem: nothing to sweep. (Any other missing file makes the
		// sweep delete nothing, which is the safe way to fail too.)
		c.cfg.Logger.Info("iceberg: orphan sweep: nothing to sweep", "table", tbl.Identifier(), "err", err)
		return OrphanResult{}, nil
	}
	if err != nil {
		return OrphanResult{}, fmt.Errorf("iceberg: orphan sweep of %v: %w", tbl.Identifier(), err)
	}
	var out OrphanResult
	for _, f := range res.OrphanFiles {
		if !guard.kept[f.Path] {
			out.Files = append(out.Files, f.Path)
			out.Bytes += f.SizeBytes
		}
	}
	c.cfg.Logger.Info("iceberg: orphan sweep", "table", tbl.Identifier(), "orphans", len(out.Files),
		"bytes", out.Bytes, "rewritten_since_listed", len(guard.kept), "dry_run", opts.DryRun)
	return out, nil
}

// sweepGuard deletes an orphan only if it is still older than the cutoff.
type sweepGuard struct {
	fs     iceio.IO
	cutoff time.Time

	mu   sync.Mutex
	kept map[string]bool // listed as orphans, then found young
}

func (g *sweepGuard) remove(location string) error {
	if st, ok := g.fs.(iceio.StatIO); ok {
		info, err := st.Stat(location)
		if err == nil && !info.ModTime().Before(g.cutoff) {
			g.mu.Lock()
			g.kept[location] = true
			g.mu.Unlock()
			return nil
		}
	}
	return g.fs.Remove(location)
}
