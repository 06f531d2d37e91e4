package iceberg

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// CompactOptions says which files Compact merges and into what.
type CompactOptions struct {
	// TargetSize is the size, in bytes, a merged file is packed up to (the
	// sum of its inputs' sizes; compression makes the output about as
	// large). Default 128 MiB.
	TargetSize int64
	// SafetyAge is how long after a partition's time range ended it is
	// taken as closed: late records and the rolls carrying them have landed
	// by then. Default 1 hour.
	SafetyAge time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// DryRun plans the merges and reports them (CompactResult counts what
	// would be removed and written) without writing or committing.
	DryRun bool
}

// DefaultTargetSize is CompactOptions.TargetSize's default.
const DefaultTargetSize = 128 << 20

// compactedProperty, in a compaction's snapshot summary, names the
// partition it merged ("<partition field id>=<value>").
const compactedProperty = "millrace.compacted-partition"

func (o CompactOptions) withDefaults() CompactOptions {
	if o.TargetSize <= 0 {
		o.TargetSize = DefaultTargetSize
	}
	if o.SafetyAge <= 0 {
		o.SafetyAge = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// CompactResult is what Compact did.
type CompactResult struct {
	// Table is the table after the last commit (the one given when Compact
	// committed nothing).
	Table *table.Table
	// Partitions is the number of partitions compacted (one commit each).
	Partitions int
	// FilesRemoved and FilesAdded count the data files replaced and written.
	FilesRemoved, FilesAdded int
}

// Compact merges the small data files of tbl's closed partitions: those of
// an hour (or day) partition whose range ended SafetyAge ago or more.
// Tables partitioned otherwise have no closed partitions and are left
// alone. Each partition's files, in path order, are packed into bins of
// up to TargetSize bytes; each bin of two or more files becomes one file
// with their rows, in order, under a name derived from the names it
// replaces (so a retried compaction writes the same object), and the
// partition's bins are committed as one replace that asserts the main
// branch's head and carries the newest snapshot's progress properties
// forward, so ReadProgress reads the same offsets after it. A replace that
// loses the race to a roll's commit is planned again on the fresh table;
// the roll, in turn, gets ErrConflict, rebases and commits again, as after
// any other worker's commit.
func (c *Catalog) Compact(ctx context.Context, tbl *table.Table, opts CompactOptions) (CompactResult, error) {
	opts = opts.withDefaults()
	res := CompactResult{Table: tbl}
	plan, err := planCompaction(ctx, tbl, opts)
	if err != nil {
		return res, err
	}
	if opts.DryRun {
		for _, bins := range plan {
			res.Partitions++
			for _, bin := range bins {
				res.FilesRemoved += len(bin)
				res.FilesAdded++
			}
		}
		return res, nil
	}
	// plannedOn is the table plan holds for: tbl, then each of this
	// compaction's own commits, which change only the partition they merge.
	plannedOn := tbl
	for _, key := range slices.Sorted(maps.Keys(plan)) {
		var removed, added int
		committed, did, err := c.commitMaintenance(ctx, res.Table, "compact "+key,
			func(tbl *table.Table, tx *table.Transaction, props iceberg.Properties) (bool, error) {
				if tbl != plannedOn {
					// Another commit won a race: it may have added (late)
					// files to the partition, or compacted it.
					fresh, err := planCompaction(ctx, tbl, opts)
					if err != nil {
						return false, err
					}
					plan, plannedOn = fresh, tbl
				}
				bins := plan[key]
				if len(bins) == 0 {
					return false, nil
				}
				var out, in []iceberg.DataFile
				for _, bin := range bins {
					df, err := mergeFiles(ctx, tbl, bin)
					if err != nil {
						return false, err
					}
					out = append(out, df)
					in = append(in, bin...)
				}
				props[compactedProperty] = key
				// A rewrite: a "replace" snapshot, which incremental readers
				// skip, as its rows are all in the table already.
				rw := tx.NewRewrite(props)
				for _, df := range in {
					rw.DeleteFile(df)
				}
				for _, df := range out {
					rw.AddDataFile(df)
				}
				if err := rw.Commit(ctx); err != nil {
					return false, fmt.Errorf("stage the replace: %w", err)
				}
				removed, added = len(in), len(out)
				return true, nil
			})
		if err != nil {
			return res, err
		}
		if did {
			plannedOn = committed
			res.Partitions++
			res.FilesRemoved += removed
			res.FilesAdded += added
			c.cfg.Logger.Info("iceberg: compacted a partition", "table", tbl.Identifier(), "partition", key,
				"files_removed", removed, "files_added", added)
		}
		res.Table = committed
	}
	return res, nil
}

// planCompaction returns, by partition key, the bins of files to merge in
// tbl's closed partitions of its current spec.
func planCompaction(ctx context.Context, tbl *table.Table, opts CompactOptions) (map[string][][]iceberg.DataFile, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	spec := tbl.Spec()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: plan the compaction of %v: %w", tbl.Identifier(), err)
	}
	byPartition := map[string][]iceberg.DataFile{}
	for _, task := range tasks {
		df := task.File
		if df.SpecID() != int32(spec.ID()) || len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles) > 0 {
			continue // written under an older spec, or with deletes to apply: not ours to merge
		}
		end, ok := partitionEnd(&spec, df.Partition())
		if !ok || end.Add(opts.SafetyAge).After(opts.Now()) {
			continue
		}
		key := partitionKey(df.Partition())
		byPartition[key] = append(byPartition[key], df)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	plan := map[string][][]iceberg.DataFile{}
	for key, files := range byPartition {
		if len(files) < 2 {
			continue
		}
		// Files written before and after a schema change hold different
		// columns: each schema's files are packed on their own.
		bySchema := map[string][]iceberg.DataFile{}
		for _, df := range files {
			sk, err := schemaKey(fs, df.FilePath())
			if err != nil {
				return nil, err
			}
			bySchema[sk] = append(bySchema[sk], df)
		}
		for _, sk := range slices.Sorted(maps.Keys(bySchema)) {
			plan[key] = append(plan[key], binPack(bySchema[sk], opts.TargetSize)...)
		}
		if len(plan[key]) == 0 {
			delete(plan, key)
		}
	}
	return plan, nil
}

// binPack packs files, in path order, into bins of up to target bytes
// each, and returns the bins of two or more files: a file alone in its
// bin is already as large as it gets.
func binPack(files []iceberg.DataFile, target int64) [][]iceberg.DataFile {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b iceberg.DataFile) int { return cmp.Compare(a.FilePath(), b.FilePath()) })
	var bins [][]iceberg.DataFile
	var bin []iceberg.DataFile
	var size int64
	flush := func() {
		if len(bin) > 1 {
			bins = append(bins, bin)
		}
		bin, size = nil, 0
	}
	for _, df := range files {
		if len(bin) > 0 && size+df.FileSizeBytes() > target {
			flush()
		}
		bin = append(bin, df)
		size += df.FileSizeBytes()
	}
	flush()
	return bins
}

// partitionEnd returns when the time range of a partition of spec ends:
// for an hour or day transform, the end of that hour or day.
func partitionEnd(spec *iceberg.PartitionSpec, part map[int]any) (time.Time, bool) {
	if spec.NumFields() != 1 {
		return time.Time{}, false
	}
	f := spec.Field(0)
	var unit time.Duration
	switch f.Transform.(type) {
	case iceberg.HourTransform:
		unit = time.Hour
	case iceberg.DayTransform:
		unit = 24 * time.Hour
	default:
		return time.Time{}, false
	}
	var n int64
	switch v := part[f.FieldID].(type) {
	case int32:
		n = int64(v)
	case int64:
		n = v
	case iceberg.Date:
		n = int64(v)
	default:
		return time.Time{}, false
	}
	return time.Unix(0, 0).UTC().Add(time.Duration(n+1) * unit), true
}

// partitionKey names a partition value, as "<field id>=<value>" pairs in
// field order.
func partitionKey(part map[int]any) string {
	var b strings.Builder
	for i, id := range slices.Sorted(maps.Keys(part)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d=%v", id, part[id])
	}
	return b.String()
}

// mergedLocation is the name of the file merging bin: next to the bin's
// first file, named by a hash of the locations it replaces, so the same
// bin always merges into the same object and an interrupted or raced
// compaction, retried, overwrites its own output instead of leaving a
// second copy behind.
func mergedLocation(bin []iceberg.DataFile) string {
	h := sha256.New()
	for _, df := range bin {
		h.Write([]byte(df.FilePath()))
		h.Write([]byte{0})
	}
	first := bin[0].FilePath()
	// Not path.Dir: it would fold the "//" of file:// and s3://.
	return first[:strings.LastIndexByte(first, '/')] + "/compacted-" + hex.EncodeToString(h.Sum(nil)[:16]) + ".parquet"
}
