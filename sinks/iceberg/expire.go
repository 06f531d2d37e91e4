package iceberg

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// offsetsTagPrefix + "<group>.<topic>" is the tag on the snapshot that
// holds a group's current offsets of a topic (the newest snapshot with its
// millrace.offsets property), which expiry never drops.
const offsetsTagPrefix = "millrace-offsets."

// OffsetsTag names the tag that protects group's offsets of topic from
// snapshot expiry.
func OffsetsTag(group, topic string) string { return offsetsTagPrefix + group + "." + topic }

// ExpireOptions says which snapshots Expire keeps.
type ExpireOptions struct {
	// Keep is how long a snapshot of the main branch is kept (time travel
	// reaches that far back). Default 7 days.
	Keep time.Duration
	// RetainLast is how many of the main branch's newest snapshots are
	// kept whatever their age. Default 1.
	RetainLast int
	// MaxSnapshots, when above zero, also expires younger snapshots while
	// the table holds more than about this many: every commit rewrites a
	// metadata file listing every snapshot kept, so a table rolled every
	// minute by a few partitions, kept for days, would make each commit
	// cost hundreds of milliseconds (docs/benchmarks.md, "Sink formats").
	MaxSnapshots int
	// DryRun counts the snapshots that would expire (ExpireResult.Expired)
	// and the tags that would protect offsets, committing nothing.
	DryRun bool
}

func (o ExpireOptions) withDefaults() ExpireOptions {
	if o.Keep <= 0 {
		o.Keep = 7 * 24 * time.Hour
	}
	if o.RetainLast <= 0 {
		o.RetainLast = 1
	}
	return o
}

// age is how old a snapshot of tbl must be to expire: Keep, or less when
// tbl holds more than MaxSnapshots, so that about the MaxSnapshots newest
// stay. iceberg-go measures the age from its own clock, a moment after now:
// the bound has a margin so the newest snapshot meant to stay is not
// expired by that moment (snapshots closer together than the margin may
// keep a few more than MaxSnapshots).
func (o ExpireOptions) age(tbl *table.Table, now time.Time) time.Duration {
	snaps := tbl.Metadata().Snapshots()
	if o.MaxSnapshots <= 0 || len(snaps) <= o.MaxSnapshots {
		return o.Keep
	}
	stamps := make([]int64, len(snaps))
	for i, s := range snaps {
		stamps[i] = s.TimestampMs
	}
	slices.Sort(stamps)
	oldestKept := time.UnixMilli(stamps[len(stamps)-o.MaxSnapshots])
	const margin = 10 * time.Millisecond
	return max(min(o.Keep, now.Sub(oldestKept)+margin), 0)
}

// ExpireResult is what Expire did.
type ExpireResult struct {
	// Table is the table after the expiry.
	Table *table.Table
	// Expired is the number of snapshots removed.
	Expired int
	// Tags maps each offsets tag to the snapshot it points at now.
	Tags map[string]int64
}

// Expire removes tbl's snapshots older than Keep (beyond the RetainLast
// newest), and the data and manifest files only they referenced. First it
// moves each group's offsets tag (OffsetsTag) to the newest snapshot that
// holds that group's offsets, so that snapshot survives however old it is
// (a group that stopped committing while others go on) and ReadProgress
// still finds it. Both commits assert the refs they read; one that loses
// a race to a roll's commit is done again on the fresh table.
func (c *Catalog) Expire(ctx context.Context, tbl *table.Table, opts ExpireOptions) (ExpireResult, error) {
	opts = opts.withDefaults()
	if opts.DryRun {
		return c.expireDryRun(ctx, tbl, opts)
	}
	var lastErr error
	for attempt := 1; attempt <= maintenanceAttempts; attempt++ {
		fresh, err := c.Reload(ctx, tbl)
		if err != nil {
			return ExpireResult{}, err
		}
		tags, err := c.moveOffsetsTags(ctx, fresh)
		if err != nil {
			lastErr = err
			continue
		}
		if fresh, err = c.Reload(ctx, fresh); err != nil {
			return ExpireResult{}, err
		}
		before := len(fresh.Metadata().Snapshots())
		tx := fresh.NewTransaction()
		if err := tx.ExpireSnapshots(table.WithOlderThan(opts.age(fresh, time.Now())), table.WithRetainLast(opts.RetainLast)); err != nil {
			return ExpireResult{}, fmt.Errorf("iceberg: expire snapshots of %v: %w", tbl.Identifier(), err)
		}
		after, err := tx.Commit(ctx)
		if err != nil {
			lastErr = err
			c.cfg.Logger.Info("iceberg: snapshot expiry lost a commit race; trying again", "table", tbl.Identifier(), "attempt", attempt, "err", err)
			continue
		}
		res := ExpireResult{Table: after, Expired: before - len(after.Metadata().Snapshots()), Tags: tags}
		c.cfg.Logger.Info("iceberg: expired snapshots", "table", tbl.Identifier(), "expired", res.Expired)
		return res, nil
	}
	return ExpireResult{}, fmt.Errorf("iceberg: expire snapshots of %v: %w", tbl.Identifier(), lastErr)
}

// moveOffsetsTags points each group's offsets tag at the newest snapshot
// of the main branch holding the group's offsets, in one catalog commit
// that asserts the main branch and every tag it moves, and returns the
// tags.
func (c *Catalog) moveOffsetsTags(ctx context.Context, tbl *table.Table) (map[string]int64, error) {
	meta := tbl.Metadata()
	tags := offsetsTagTargets(tbl)
	var reqs []table.Requirement
	var updates []table.Update
	for name, id := range tags {
		var current *int64
		if ref := meta.SnapshotByName(name); ref != nil {
			if ref.SnapshotID == id {
				continue
			}
			current = &ref.SnapshotID
		}
		reqs = append(reqs, table.AssertRefSnapshotID(name, current))
		// The longest age a ref can have: a table's max-ref-age property
		// must not expire the tag.
		updates = append(updates, table.NewSetSnapshotRefUpdate(name, id, table.TagRef, math.MaxInt64, 0, 0))
	}
	if len(updates) == 0 {
		return tags, nil
	}
	head := headSnapshotID(tbl)
	reqs = append(reqs, table.AssertRefSnapshotID(table.MainBranch, &head))
	if _, _, err := c.catalog.CommitTable(ctx, tbl.Identifier(), reqs, updates); err != nil {
		return nil, fmt.Errorf("iceberg: move the offsets tags of %v: %w", tbl.Identifier(), err)
	}
	return tags, nil
}

// offsetsTagTargets maps each group's offsets tag to the newest snapshot
// of tbl's main branch holding that group's offsets.
func offsetsTagTargets(tbl *table.Table) map[string]int64 {
	meta := tbl.Metadata()
	tags := map[string]int64{}
	for s := meta.SnapshotByName(table.MainBranch); s != nil; {
		if s.Summary != nil {
			for k := range s.Summary.Properties {
				name, ok := strings.CutPrefix(k, offsetsPrefix)
				if !ok {
					continue
				}
				if _, newer := tags[offsetsTagPrefix+name]; !newer {
					tags[offsetsTagPrefix+name] = s.SnapshotID
				}
			}
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return tags
}

// expireDryRun stages the expiry on a fresh copy of tbl, without the tag
// moves' commit, and counts what it would drop: the snapshots the staged
// expiry removes, less those the offsets tags would keep.
func (c *Catalog) expireDryRun(ctx context.Context, tbl *table.Table, opts ExpireOptions) (ExpireResult, error) {
	fresh, err := c.Reload(ctx, tbl)
	if err != nil {
		return ExpireResult{}, err
	}
	tags := offsetsTagTargets(fresh)
	protected := map[int64]bool{}
	for _, id := range tags {
		protected[id] = true
	}
	tx := fresh.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithOlderThan(opts.age(fresh, time.Now())), table.WithRetainLast(opts.RetainLast)); err != nil {
		return ExpireResult{}, fmt.Errorf("iceberg: expire snapshots of %v: %w", tbl.Identifier(), err)
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return ExpireResult{}, fmt.Errorf("iceberg: expire snapshots of %v: %w", tbl.Identifier(), err)
	}
	kept := map[int64]bool{}
	for _, s := range staged.Metadata().Snapshots() {
		kept[s.SnapshotID] = true
	}
	res := ExpireResult{Table: fresh, Tags: tags}
	for _, s := range fresh.Metadata().Snapshots() {
		if !kept[s.SnapshotID] && !protected[s.SnapshotID] {
			res.Expired++
		}
	}
	return res, nil
}
