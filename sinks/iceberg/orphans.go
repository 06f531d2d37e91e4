package iceberg

import (
	"context"
	"fmt"
	"time"

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
func (c *Catalog) RemoveOrphans(ctx context.Context, tbl *table.Table, opts OrphanOptions) (OrphanResult, error) {
	if opts.SafetyAge <= 0 {
		opts.SafetyAge = time.Hour
	}
	fresh, err := c.Reload(ctx, tbl)
	if err != nil {
		return OrphanResult{}, err
	}
	res, err := fresh.DeleteOrphanFiles(ctx,
		table.WithLocation(dataLocation(fresh)),
		table.WithFilesOlderThan(opts.SafetyAge),
		table.WithDryRun(opts.DryRun))
	if err != nil {
		return OrphanResult{}, fmt.Errorf("iceberg: orphan sweep of %v: %w", tbl.Identifier(), err)
	}
	c.cfg.Logger.Info("iceberg: orphan sweep", "table", tbl.Identifier(), "orphans", len(res.OrphanFileLocations),
		"bytes", res.TotalSizeBytes, "dry_run", opts.DryRun)
	return OrphanResult{Files: res.OrphanFileLocations, Bytes: res.TotalSizeBytes}, nil
}
