package iceberg

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"millrace/internal/waitfor"
)

// afterHour0 is a clock at which hour0 is closed (it ended two hours ago)
// and hour0+2h is still open.
func afterHour0() time.Time { return hour0.Add(3 * time.Hour) }

// filesByHour counts the current snapshot's data files by hour partition.
func filesByHour(t *testing.T, tbl *table.Table) map[int32][]string {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32][]string{}
	for _, task := range tasks {
		h := task.File.Partition()[firstPartitionFieldID].(int32)
		out[h] = append(out[h], task.File.FilePath())
	}
	return out
}

func hourOf(at time.Time) int32 { return int32(at.Unix() / 3600) }

// commitRolls commits n rolls of 5 rows each, each its own file named
// prefix-<i>.parquet in the hour at, continuing partition 0 of group sink
// from offset from; it returns the table and the rows.
func commitRolls(t *testing.T, c *Catalog, tbl *table.Table, prefix string, n int, from int64, at time.Time) (*table.Table, []metricRow) {
	t.Helper()
	var all []metricRow
	for i := range n {
		rs := rows(fmt.Sprintf("%s%02d", prefix, i), 5, at)
		all = append(all, rs...)
		off := from + int64(5*i)
		tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
			Files:      []iceberg.DataFile{writeFile(t, tbl, fmt.Sprintf("%s-%02d.parquet", prefix, i), rs)},
			Ranges:     map[int32]Range{0: {off, off + 5}},
			Watermarks: map[int32]string{0: fmt.Sprintf("w%d", off+5)},
		})
	}
	return tbl, all
}

func sameProgress(t *testing.T, got, want Progress) {
	t.Helper()
	if !maps.Equal(got.Offsets, want.Offsets) || !maps.Equal(got.Watermarks, want.Watermarks) {
		t.Errorf("progress %v %v, want %v %v", got.Offsets, got.Watermarks, want.Offsets, want.Watermarks)
	}
}

func TestCompactMergesAClosedHour(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	tbl, closed := commitRolls(t, c, tbl, "closed", 20, 0, hour0)
	tbl, open := commitRolls(t, c, tbl, "open", 2, 100, hour0.Add(2*time.Hour))
	before := scan(t, tbl)
	if want := wantRows(closed, open); !slices.Equal(before, want) {
		t.Fatalf("scan before compaction: %d rows, want %d", len(before), len(want))
	}
	progressBefore := progress(t, tbl, "sink")
	opts := CompactOptions{SafetyAge: time.Hour, Now: afterHour0}

	// A compaction that wrote its file and crashed before committing:
	// the retry must write the same object, not a second one.
	plan, err := planCompaction(t.Context(), tbl, opts.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("planned %d partitions, want only the closed hour", len(plan))
	}
	var crashed iceberg.DataFile
	for _, bins := range plan {
		if len(bins) != 1 || len(bins[0]) != 20 {
			t.Fatalf("bins %v, want one of the 20 files", bins)
		}
		if crashed, err = mergeFiles(t.Context(), tbl, bins[0]); err != nil {
			t.Fatal(err)
		}
	}
	crashedBytes, err := os.ReadFile(strings.TrimPrefix(crashed.FilePath(), "file://"))
	if err != nil {
		t.Fatal(err)
	}

	// A dry run says what the compaction will do, and does none of it.
	dry := opts
	dry.DryRun = true
	planned, err := c.Compact(t.Context(), tbl, dry)
	if err != nil {
		t.Fatal(err)
	}
	if planned.Partitions != 1 || planned.FilesRemoved != 20 || planned.FilesAdded != 1 || planned.Table != tbl {
		t.Errorf("dry run %+v, want 1 partition, 20 files into 1, and the table unchanged", planned)
	}
	if fresh := must(c.Reload(t.Context(), tbl)); fresh.CurrentSnapshot().SnapshotID != tbl.CurrentSnapshot().SnapshotID {
		t.Error("the dry run committed a snapshot")
	}

	res, err := c.Compact(t.Context(), tbl, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 1 || res.FilesRemoved != 20 || res.FilesAdded != 1 {
		t.Errorf("compaction %+v, want 1 partition, 20 files into 1", res)
	}
	after := filesByHour(t, res.Table)
	if got := after[hourOf(hour0)]; len(got) != 1 || got[0] != crashed.FilePath() {
		t.Errorf("closed hour's files after compaction %v, want only %s (≥10x fewer than 20)", got, crashed.FilePath())
	}
	if got := after[hourOf(hour0.Add(2*time.Hour))]; len(got) != 2 {
		t.Errorf("open hour's files after compaction %v, want its 2 left alone", got)
	}
	again, err := os.ReadFile(strings.TrimPrefix(crashed.FilePath(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, crashedBytes) {
		t.Error("the committed merged file differs from the crashed attempt's: names or contents are not deterministic")
	}

	// Same rows, same offsets; and a reader still holding the snapshot from
	// before reads the same rows (the replace deleted no file).
	if got := scan(t, res.Table); !slices.Equal(got, before) {
		t.Errorf("scan after compaction: %d rows differ from the %d before", len(got), len(before))
	}
	if got := scan(t, tbl); !slices.Equal(got, before) {
		t.Errorf("scan of the snapshot before compaction, read after it: %d rows, want %d", len(got), len(before))
	}
	head := res.Table.CurrentSnapshot()
	if head.Summary.Operation != table.OpReplace {
		t.Errorf("compaction's snapshot operation %q, want %q", head.Summary.Operation, table.OpReplace)
	}
	if head.Summary.Properties[offsetsKey("sink", "metrics")] == "" {
		t.Errorf("compaction's snapshot summary %v does not carry the offsets", head.Summary.Properties)
	}
	pAfter := progress(t, res.Table, "sink")
	sameProgress(t, pAfter, progressBefore)
	if pAfter.SnapshotID != head.SnapshotID {
		t.Errorf("progress read from snapshot %d, want the compaction's %d", pAfter.SnapshotID, head.SnapshotID)
	}

	entries, err := os.ReadDir(strings.TrimPrefix(tbl.Location(), "file://") + "/data")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind by a merge", e.Name())
		}
	}

	// A second run finds nothing to do.
	res2, err := c.Compact(t.Context(), res.Table, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Partitions != 0 || res2.Table.CurrentSnapshot().SnapshotID != head.SnapshotID {
		t.Errorf("second compaction %+v committed, want nothing", res2)
	}
}

func TestCompactPacksUpToTheTargetSize(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	tbl, rs := commitRolls(t, c, tbl, "r", 6, 0, hour0)
	var size int64
	for _, task := range must(tbl.Scan().PlanFiles(t.Context())) {
		size = max(size, task.File.FileSizeBytes())
	}
	// Room for two files per bin: 6 files become 3.
	res, err := c.Compact(t.Context(), tbl, CompactOptions{TargetSize: 2*size + size/2, Now: afterHour0})
	if err != nil {
		t.Fatal(err)
	}
	if got := filesByHour(t, res.Table)[hourOf(hour0)]; len(got) != 3 {
		t.Errorf("files after packing 6 files two to a bin: %d, want 3", len(got))
	}
	if got := scan(t, res.Table); !slices.Equal(got, wantRows(rs)) {
		t.Errorf("rows changed by compaction")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A compaction and a roll commit race from the same table: whichever
// commits second fails the assertion on the branch's head and retries
// cleanly, and neither loses rows nor offsets.
func TestCompactionRacesARollCommit(t *testing.T) {
	t.Run("roll first", func(t *testing.T) {
		c := openSQLite(t, t.TempDir())
		tbl, closed := commitRolls(t, c, metricsTable(t, c), "c", 20, 0, hour0)
		// A late roll lands in the closed hour after the compaction loaded
		// the table.
		late := rows("late", 5, hour0.Add(30*time.Minute))
		afterRoll := commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
			Files:  []iceberg.DataFile{writeFile(t, tbl, "late.parquet", late)},
			Ranges: map[int32]Range{0: {100, 105}},
		})
		res, err := c.Compact(t.Context(), tbl, CompactOptions{Now: afterHour0})
		if err != nil {
			t.Fatalf("compaction after losing the race: %v", err)
		}
		head := res.Table.CurrentSnapshot()
		if head.ParentSnapshotID == nil || *head.ParentSnapshotID != afterRoll.CurrentSnapshot().SnapshotID {
			t.Errorf("compaction's snapshot %d is not built on the roll's %d", head.SnapshotID, afterRoll.CurrentSnapshot().SnapshotID)
		}
		if got := filesByHour(t, res.Table)[hourOf(hour0)]; len(got) != 1 {
			t.Errorf("closed hour's files %v, want the 21 merged into 1 (the late one too)", got)
		}
		if got := scan(t, res.Table); !slices.Equal(got, wantRows(closed, late)) {
			t.Errorf("rows after the race: %d, want %d", len(got), len(closed)+len(late))
		}
		if got := encodeOffsets(progress(t, res.Table, "sink").Offsets); got != "0:105" {
			t.Errorf("offsets after the race %s, want the roll's 0:105", got)
		}
	})
	t.Run("compaction first", func(t *testing.T) {
		c := openSQLite(t, t.TempDir())
		tbl, closed := commitRolls(t, c, metricsTable(t, c), "c", 20, 0, hour0)
		res, err := c.Compact(t.Context(), tbl, CompactOptions{Now: afterHour0})
		if err != nil {
			t.Fatal(err)
		}
		next := rows("next", 5, hour0.Add(2*time.Hour))
		cm := Commit{Group: "sink", Topic: "metrics",
			Files:  []iceberg.DataFile{writeFile(t, tbl, "next.parquet", next)},
			Ranges: map[int32]Range{0: {100, 105}},
		}
		_, err = c.CommitRoll(t.Context(), tbl, cm)
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("roll on the table from before the compaction: %v, want ErrConflict", err)
		}
		fresh, err := c.Rebase(t.Context(), tbl, cm)
		if err != nil {
			t.Fatalf("rebase over a compaction: %v, want a clean rebase (offsets unmoved)", err)
		}
		fresh = commit(t, c, fresh, cm)
		if fresh.CurrentSnapshot().ParentSnapshotID == nil || *fresh.CurrentSnapshot().ParentSnapshotID != res.Table.CurrentSnapshot().SnapshotID {
			t.Error("the rebased roll is not built on the compaction")
		}
		if got := scan(t, fresh); !slices.Equal(got, wantRows(closed, next)) {
			t.Errorf("rows after the race: %d, want %d", len(got), len(closed)+len(next))
		}
		if got := encodeOffsets(progress(t, fresh, "sink").Offsets); got != "0:105" {
			t.Errorf("offsets after the race %s, want 0:105", got)
		}
	})
}

func TestExpireKeepsTheOffsetsSnapshot(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl, sinkRows := commitRolls(t, c, metricsTable(t, c), "s", 3, 0, hour0)
	sinkSnapshot := tbl.CurrentSnapshot().SnapshotID
	// Another group goes on committing; the sink's offsets are now three
	// snapshots behind the head.
	for i := range 3 {
		tbl = commit(t, c, tbl, Commit{Group: "other", Topic: "metrics", Ranges: map[int32]Range{0: {int64(i), int64(i + 1)}}})
	}
	waitOlder(t, tbl)

	// A dry run counts the same 4 (the sink's offsets snapshot is spared
	// by the tag it would get), and drops nothing.
	dry, err := c.Expire(t.Context(), tbl, ExpireOptions{Keep: time.Millisecond, RetainLast: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(must(c.Reload(t.Context(), tbl)).Metadata().Snapshots()); dry.Expired != 4 || n != 6 {
		t.Errorf("dry run: %d would expire, %d snapshots left; want 4 and all 6", dry.Expired, n)
	}

	res, err := c.Expire(t.Context(), tbl, ExpireOptions{Keep: time.Millisecond, RetainLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	meta := res.Table.Metadata()
	var kept []int64
	for _, s := range meta.Snapshots() {
		kept = append(kept, s.SnapshotID)
	}
	slices.Sort(kept)
	want := []int64{sinkSnapshot, res.Table.CurrentSnapshot().SnapshotID}
	slices.Sort(want)
	if res.Expired != 4 || !slices.Equal(kept, want) {
		t.Errorf("expired %d, kept %v; want 4 expired, kept the head and the sink's offsets snapshot %v", res.Expired, kept, want)
	}
	if s := meta.SnapshotByName(OffsetsTag("sink", "metrics")); s == nil || s.SnapshotID != sinkSnapshot {
		t.Errorf("sink's offsets tag on %v, want snapshot %d", s, sinkSnapshot)
	}
	p := progress(t, res.Table, "sink")
	if got := encodeOffsets(p.Offsets); got != "0:15" || p.Watermarks[0] != "w15" {
		t.Errorf("sink's progress after expiry %v %v, want 0:15 w15 from the tagged snapshot", p.Offsets, p.Watermarks)
	}
	if got := encodeOffsets(progress(t, res.Table, "other").Offsets); got != "0:3" {
		t.Errorf("other group's offsets after expiry %s, want 0:3", got)
	}
	if got := scan(t, res.Table); !slices.Equal(got, wantRows(sinkRows)) {
		t.Errorf("rows after expiry: %d, want %d", len(got), len(sinkRows))
	}

	// The sink commits again: the next expiry moves its tag forward and the
	// old offsets snapshot goes.
	tbl = commit(t, c, res.Table, Commit{Group: "sink", Topic: "metrics", Ranges: map[int32]Range{0: {15, 20}}})
	waitOlder(t, tbl)
	res, err = c.Expire(t.Context(), tbl, ExpireOptions{Keep: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	head := res.Table.CurrentSnapshot().SnapshotID
	if got := res.Tags[OffsetsTag("sink", "metrics")]; got != head {
		t.Errorf("sink's tag on %d after its new commit, want the head %d", got, head)
	}
	if res.Table.Metadata().SnapshotByID(sinkSnapshot) != nil {
		t.Error("the sink's old offsets snapshot survived once its tag moved on")
	}
	if got := encodeOffsets(progress(t, res.Table, "sink").Offsets); got != "0:20" {
		t.Errorf("sink's offsets %s, want 0:20", got)
	}
}

// waitOlder waits until tbl's head snapshot is older, in the catalog's
// millisecond timestamps, than a 1ms retention.
func waitOlder(t *testing.T, tbl *table.Table) {
	t.Helper()
	ts := tbl.CurrentSnapshot().TimestampMs
	waitfor.Until(t, time.Second, "the head snapshot to age 2ms", func() bool { return time.Now().UnixMilli() > ts+2 })
}

func TestRemoveOrphans(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl, rs := commitRolls(t, c, metricsTable(t, c), "r", 2, 0, hour0)
	// Compaction replaces both files: they stay referenced by the snapshot
	// before it.
	res, err := c.Compact(t.Context(), tbl, CompactOptions{Now: afterHour0})
	if err != nil {
		t.Fatal(err)
	}
	tbl = res.Table
	// A zombie's files, never committed: one old, one just written.
	oldOrphan := writeFile(t, tbl, "zombie-old.parquet", rows("z", 2, hour0)).FilePath()
	youngOrphan := writeFile(t, tbl, "zombie-young.parquet", rows("y", 2, hour0)).FilePath()

	local := func(loc string) string { return strings.TrimPrefix(loc, "file://") }
	old := time.Now().Add(-2 * time.Hour)
	var referenced []string
	for _, task := range must(tbl.Scan().PlanFiles(t.Context())) {
		referenced = append(referenced, task.File.FilePath())
	}
	for _, f := range []string{"r-00.parquet", "r-01.parquet"} {
		referenced = append(referenced, tbl.Location()+"/data/"+f)
	}
	for _, loc := range append(slices.Clone(referenced), oldOrphan) {
		if err := os.Chtimes(local(loc), old, old); err != nil {
			t.Fatal(err)
		}
	}

	dry, err := c.RemoveOrphans(t.Context(), tbl, OrphanOptions{SafetyAge: time.Minute, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Files) != 1 || local(dry.Files[0]) != local(oldOrphan) {
		t.Errorf("dry run found %v, want only %s", dry.Files, oldOrphan)
	}
	if _, err := os.Stat(local(oldOrphan)); err != nil {
		t.Errorf("a dry run deleted: %v", err)
	}

	swept, err := c.RemoveOrphans(t.Context(), tbl, OrphanOptions{SafetyAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(swept.Files) != 1 || swept.Bytes <= 0 {
		t.Errorf("sweep %+v, want the one old orphan", swept)
	}
	if _, err := os.Stat(local(oldOrphan)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old orphan after the sweep: %v, want it gone", err)
	}
	for _, loc := range append(referenced, youngOrphan) {
		if _, err := os.Stat(local(loc)); err != nil {
			t.Errorf("sweep removed %s, referenced or young: %v", loc, err)
		}
	}
	if got := scan(t, tbl); !slices.Equal(got, wantRows(rs)) {
		t.Errorf("rows after the sweep: %d, want %d", len(got), len(rs))
	}
}

// The sweep's last check: a file listed as an old orphan but written
// again since (a compaction retried under its deterministic name) stays.
func TestSweepGuardKeepsARewrittenFile(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	loc := writeFile(t, tbl, "compacted-x.parquet", rows("x", 1, hour0)).FilePath()
	fs, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g := &sweepGuard{fs: fs, cutoff: time.Now().Add(-time.Hour), kept: map[string]bool{}}
	if err := g.remove(loc); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(strings.TrimPrefix(loc, "file://")); err != nil || !g.kept[loc] {
		t.Fatalf("a young file: stat %v, kept %v; want it kept", err, g.kept)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(strings.TrimPrefix(loc, "file://"), old, old); err != nil {
		t.Fatal(err)
	}
	g.kept = map[string]bool{}
	if err := g.remove(loc); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(strings.TrimPrefix(loc, "file://")); !errors.Is(err, os.ErrNotExist) || g.kept[loc] {
		t.Fatalf("an old file: stat %v, kept %v; want it deleted", err, g.kept)
	}
}

// A table no roll has landed in yet has no data directory: maintenance
// finds nothing to do, and no error.
func TestMaintainANewTable(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	res, err := c.Maintain(t.Context(), metricsTable(t, c), MaintainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Compact.FilesRemoved != 0 || res.Expire.Expired != 0 || len(res.Orphans.Files) != 0 {
		t.Errorf("maintenance of an empty table did %+v", res)
	}
}

// Maintain's three steps together: the small files of a closed hour are
// merged, expiry drops the snapshots that still referenced them (and
// deletes them), and the rows and offsets are those from before.
func TestMaintainFreesTheCompactedFiles(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl, rs := commitRolls(t, c, metricsTable(t, c), "m", 10, 0, hour0)
	var small []string
	for _, task := range must(tbl.Scan().PlanFiles(t.Context())) {
		small = append(small, strings.TrimPrefix(task.File.FilePath(), "file://"))
	}
	res, err := c.Compact(t.Context(), tbl, CompactOptions{Now: afterHour0})
	if err != nil {
		t.Fatal(err)
	}
	waitOlder(t, res.Table)

	m, err := c.Maintain(t.Context(), res.Table, MaintainOptions{
		Compact: CompactOptions{Now: afterHour0},
		Expire:  ExpireOptions{Keep: time.Millisecond},
		Orphans: OrphanOptions{SafetyAge: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Compact.Partitions != 0 || len(m.Table.Metadata().Snapshots()) != 1 || len(m.Orphans.Files) != 0 {
		t.Errorf("maintain: compacted %d partitions, kept %d snapshots, swept %v; want 0, 1 (the compaction's), none",
			m.Compact.Partitions, len(m.Table.Metadata().Snapshots()), m.Orphans.Files)
	}
	for _, f := range small {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("replaced small file %s after expiry: %v, want deleted", f, err)
		}
	}
	if got := scan(t, m.Table); !slices.Equal(got, wantRows(rs)) {
		t.Errorf("rows after maintenance: %d, want %d", len(got), len(rs))
	}
	if got := encodeOffsets(progress(t, m.Table, "sink").Offsets); got != "0:50" {
		t.Errorf("offsets after maintenance %s, want 0:50", got)
	}
}

// A worker commits rolls while a compaction runs on the same table: every
// commit that loses the race retries cleanly (the roll after a rebase, the
// compaction after planning again) and nothing is lost or doubled.
func TestCompactionConcurrentWithRolls(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl, closed := commitRolls(t, c, metricsTable(t, c), "c", 20, 0, hour0)
	var rolls []Commit
	var rolled []metricRow
	// Each roll can make the compaction lose at most one race: fewer rolls
	// than its attempts, so it always lands.
	for i := range maintenanceAttempts - 1 {
		rs := rows(fmt.Sprintf("live%d", i), 3, hour0.Add(2*time.Hour))
		rolled = append(rolled, rs...)
		from := int64(100 + 3*i)
		rolls = append(rolls, Commit{Group: "sink", Topic: "metrics",
			Files:  []iceberg.DataFile{writeFile(t, tbl, fmt.Sprintf("live-%d.parquet", i), rs)},
			Ranges: map[int32]Range{0: {from, from + 3}},
		})
	}
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics", Ranges: map[int32]Range{0: {100, 100}}})

	rollErr := make(chan error, 1)
	go func() {
		cur := tbl
		for _, cm := range rolls {
			next, err := c.CommitRoll(t.Context(), cur, cm)
			for errors.Is(err, ErrConflict) {
				if cur, err = c.Rebase(t.Context(), cur, cm); err == nil {
					next, err = c.CommitRoll(t.Context(), cur, cm)
				}
			}
			if err != nil {
				rollErr <- err
				return
			}
			cur = next
		}
		rollErr <- nil
	}()
	res, err := c.Compact(t.Context(), tbl, CompactOptions{Now: afterHour0})
	if err != nil {
		t.Errorf("compaction: %v", err)
	}
	if err := <-rollErr; err != nil {
		t.Fatalf("rolls: %v", err)
	}
	if res.Partitions != 1 {
		t.Errorf("compaction %+v, want the closed hour compacted", res)
	}
	final, err := c.Reload(t.Context(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	if got := filesByHour(t, final)[hourOf(hour0)]; len(got) != 1 {
		t.Errorf("closed hour's files %d, want 1", len(got))
	}
	if got := scan(t, final); !slices.Equal(got, wantRows(closed, rolled)) {
		t.Errorf("rows: %d, want %d", len(got), len(closed)+len(rolled))
	}
	if got, want := encodeOffsets(progress(t, final, "sink").Offsets), fmt.Sprintf("0:%d", 100+3*len(rolls)); got != want {
		t.Errorf("offsets %s, want %s", got, want)
	}
}

// TestExpireBoundsTheSnapshotCount: with MaxSnapshots, snapshots younger
// than Keep expire too while the table holds more than the bound, the
// newest first kept.
func TestExpireBoundsTheSnapshotCount(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	for i := range 5 {
		// Commits further apart than the bound's margin (10 ms).
		if i > 0 {
			ts := tbl.CurrentSnapshot().TimestampMs
			waitfor.Until(t, time.Second, "15ms after the last commit", func() bool { return time.Now().UnixMilli() > ts+15 })
		}
		tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics", Ranges: map[int32]Range{0: {int64(i), int64(i + 1)}}})
	}
	var newest []int64
	for _, s := range tbl.Metadata().Snapshots()[3:] {
		newest = append(newest, s.SnapshotID)
	}
	res, err := c.Expire(t.Context(), tbl, ExpireOptions{Keep: 24 * time.Hour, MaxSnapshots: 2})
	if err != nil {
		t.Fatal(err)
	}
	var kept []int64
	for _, s := range res.Table.Metadata().Snapshots() {
		kept = append(kept, s.SnapshotID)
	}
	if res.Expired != 3 || !slices.Equal(kept, newest) {
		t.Errorf("expired %d, kept %v; want 3 expired and the 2 newest %v kept", res.Expired, kept, newest)
	}
	// Within the bound nothing younger than Keep goes.
	res, err = c.Expire(t.Context(), res.Table, ExpireOptions{Keep: 24 * time.Hour, MaxSnapshots: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired != 0 {
		t.Errorf("expired %d at the bound, want 0", res.Expired)
	}
}
