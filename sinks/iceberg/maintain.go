package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// maintenanceAttempts bounds how often a maintenance commit that lost the
// race to another commit (a roll, usually) is planned again on the fresh
// table. A roll a minute makes a second loss rare; a table that moves
// faster than compaction can plan is left for the next run.
const maintenanceAttempts = 5

// carriedProgress returns every millrace progress property (offsets and
// watermarks of every group) as the newest snapshot of tbl's main branch
// that has it says, for a maintenance commit to carry forward: its
// snapshot then holds the whole truth, as a roll's does, and ReadProgress
// stops at it. The commit-ID property is not carried: it names the
// attempt of the commit that wrote it.
func carriedProgress(tbl *table.Table) iceberg.Properties {
	props := iceberg.Properties{}
	meta := tbl.Metadata()
	for s := meta.SnapshotByName(table.MainBranch); s != nil; {
		if s.Summary != nil {
			for k, v := range s.Summary.Properties {
				if !strings.HasPrefix(k, offsetsPrefix) && !strings.HasPrefix(k, watermarksPrefix) {
					continue
				}
				if _, newer := props[k]; !newer {
					props[k] = v
				}
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return props
}

// commitMaintenance commits what stage puts on a transaction of tbl,
// asserting the main branch's head as a roll does, and plans again on the
// fresh table when another commit won the race: stage is called with the
// table it must plan on, and reports false when there is nothing (left)
// to do. It returns the table after the commit, and whether there was one.
func (c *Catalog) commitMaintenance(ctx context.Context, tbl *table.Table, what string,
	stage func(tbl *table.Table, tx *table.Transaction, props iceberg.Properties) (bool, error)) (*table.Table, bool, error) {
	for attempt := 1; ; attempt++ {
		id, err := commitID()
		if err != nil {
			return nil, false, err
		}
		props := carriedProgress(tbl)
		props[commitIDProperty] = id
		tx := tbl.NewTransaction()
		if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
			return nil, false, fmt.Errorf("iceberg: %s: assert the main branch: %w", what, err)
		}
		ok, err := stage(tbl, tx, props)
		if err != nil || !ok {
			return tbl, false, err
		}
		committed, err := tx.Commit(ctx)
		if err == nil {
			return committed, true, nil
		}
		committed, err = c.afterFailedCommit(ctx, tbl, id, err)
		if err == nil {
			return committed, true, nil
		}
		if !errors.Is(err, ErrConflict) || attempt == maintenanceAttempts {
			return nil, false, fmt.Errorf("iceberg: %s: %w", what, err)
		}
		c.cfg.Logger.Info("iceberg: maintenance lost a commit race; planning again", "what", what, "table", tbl.Identifier(), "attempt", attempt)
		if tbl, err = c.Reload(ctx, tbl); err != nil {
			return nil, false, err
		}
	}
}

// dataLocation is where tbl's data files go: the write.data.path property,
// else <table location>/data (iceberg-go's and the sink's default).
func dataLocation(tbl *table.Table) string {
	if p := tbl.Properties()[table.WriteDataPathKey]; p != "" {
		return strings.TrimSuffix(p, "/")
	}
	return strings.TrimSuffix(tbl.Location(), "/") + "/data"
}

// MaintainOptions are the options of the three maintenance operations.
type MaintainOptions struct {
	Compact CompactOptions
	Expire  ExpireOptions
	Orphans OrphanOptions
}

// MaintainResult is what Maintain did.
type MaintainResult struct {
	// Table is the table after the last commit.
	Table   *table.Table
	Compact CompactResult
	Expire  ExpireResult
	Orphans OrphanResult
}

// Maintain runs a table's maintenance in the order that frees the most:
// Compact (the merged files replace small ones in a new snapshot), Expire
// (snapshots past retention go, and with them the small files only they
// referenced) and RemoveOrphans (what no snapshot ever referenced). It
// stops at the first error, returning what was done before it.
func (c *Catalog) Maintain(ctx context.Context, tbl *table.Table, opts MaintainOptions) (MaintainResult, error) {
	res := MaintainResult{Table: tbl}
	var err error
	if res.Compact, err = c.Compact(ctx, tbl, opts.Compact); err != nil {
		return res, err
	}
	res.Table = res.Compact.Table
	if res.Expire, err = c.Expire(ctx, res.Table, opts.Expire); err != nil {
		return res, err
	}
	res.Table = res.Expire.Table
	res.Orphans, err = c.RemoveOrphans(ctx, res.Table, opts.Orphans)
	return res, err
}
