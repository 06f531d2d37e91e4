package lakeread

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"millrace/sinks/iceberg"
	"millrace/sinks/lake"
)

// ErrNoTable is returned (wrapped) when the catalog has no table for a
// topic: the topic is landed as Hive directories, or not at all.
var ErrNoTable = errors.New("lakeread: no table")

// DefaultCatalogName is the file of the default SQLite catalog in a
// warehouse directory, where `millrace sink --format iceberg` keeps it.
const DefaultCatalogName = "catalog.db"

// HasDefaultCatalog reports whether the warehouse directory dir holds the
// default SQLite catalog.
func HasDefaultCatalog(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, DefaultCatalogName))
	return err == nil && st.Mode().IsRegular()
}

// Catalog reads the tables of an Iceberg catalog the sinks commit to.
type Catalog struct {
	cat       *iceberg.Catalog
	warehouse string // the warehouse directory
}

// OpenCatalog opens the catalog cfg names, as `millrace sink --format
// iceberg` takes it; cfg.Directory is the warehouse. A SQLite catalog
// must exist already: a reader does not create one where a typo pointed.
func OpenCatalog(ctx context.Context, cfg iceberg.Config) (*Catalog, error) {
	if cfg.Directory == "" {
		return nil, errors.New("lakeread: a table's warehouse directory is needed")
	}
	if cfg.Catalog == "" || cfg.Catalog == iceberg.CatalogSQLite {
		path := cfg.Path
		if path == "" {
			path = filepath.Join(cfg.Directory, DefaultCatalogName)
		}
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			return nil, fmt.Errorf("lakeread: no SQLite catalog at %s", path)
		}
	}
	cat, err := iceberg.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Catalog{cat: cat, warehouse: strings.TrimSuffix(cfg.Directory, "/")}, nil
}

// Close releases the catalog.
func (c *Catalog) Close() error { return c.cat.Close() }

// Topics returns the topics that have a table in the catalog's namespace,
// sorted.
func (c *Catalog) Topics(ctx context.Context) ([]string, error) {
	var out []string
	for id, err := range c.cat.Catalog().ListTables(ctx, catalog.ToIdentifier(c.cat.Namespace())) {
		if err != nil {
			return nil, fmt.Errorf("lakeread: the tables of %s: %w", c.cat.Namespace(), err)
		}
		out = append(out, id[len(id)-1])
	}
	slices.Sort(out)
	return out, nil
}

// Table is what a topic's table holds: its snapshots, and the data files
// and partitions of its current snapshot.
type Table struct {
	// Identifier is "<namespace>.<topic>".
	Identifier string `json:"identifier"`
	// Location is the table's directory; MetadataLocation its current
	// metadata file, which engines (DuckDB's iceberg_scan) read.
	Location         string `json:"location"`
	MetadataLocation string `json:"metadata_location"`
	// Spec is the current partition spec, as Iceberg prints it, on one
	// line: "[ 1000: ts_hour: hour(9) ]".
	Spec string `json:"spec"`
	// Columns are the current schema's top-level columns, in order.
	Columns []string `json:"columns"`
	// CurrentSnapshotID is 0 while nothing was committed.
	CurrentSnapshotID int64 `json:"current_snapshot_id"`
	// Snapshots are every snapshot the metadata keeps, oldest first.
	Snapshots []Snapshot `json:"snapshots"`
	// Files are the current snapshot's data files, in path order (hour,
	// partition, offset): what a reader of the table reads, and nothing
	// else under the table's directory.
	Files []DataFile `json:"files"`
	// Partitions are the current snapshot's partitions, in order.
	Partitions []Partition `json:"partitions"`
	// Rows and Bytes are the current snapshot's totals.
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
	// Groups are the sink groups that land the table, with how far each
	// has landed it, newest first.
	Groups []GroupProgress `json:"groups,omitempty"`
}

// GroupProgress is how far a sink group has landed a topic in its table:
// the newest snapshot that records it says (iceberg.ReadProgress).
type GroupProgress struct {
	Group string `json:"group"`
	// SnapshotID and Time are the snapshot's that records it.
	SnapshotID int64     `json:"snapshot_id"`
	Time       time.Time `json:"time"`
	// Offsets maps a partition to the next offset to land.
	Offsets map[int32]int64 `json:"offsets"`
	// Watermarks maps a partition to the sink's watermark after its last
	// roll (sinks/lake: its largest record time).
	Watermarks map[int32]string `json:"watermarks,omitempty"`
}

// offsetsPrefix starts the snapshot summary property that holds a group's
// offsets, "millrace.offsets.<group>.<topic>" (sinks/iceberg, progress.go).
const offsetsPrefix = "millrace.offsets."

// Snapshot is one commit of a table.
type Snapshot struct {
	ID int64 `json:"id"`
	// ParentID is 0 for the first snapshot.
	ParentID  int64     `json:"parent_id,omitempty"`
	Time      time.Time `json:"time"`
	Operation string    `json:"operation"`
	// Summary is the snapshot summary: Iceberg's counts (added-records,
	// total-records, …) and millrace's properties, the group offsets
	// (millrace.offsets.<group>.<topic>) among them.
	Summary map[string]string `json:"summary"`
	Current bool              `json:"current,omitempty"`
}

// DataFile is one data file of a table's current snapshot.
type DataFile struct {
	// Location is the file as the table lists it (file:///…).
	Location string `json:"location"`
	// Name is the file's name relative to the warehouse directory; "" for
	// a file outside it (which lakeread cannot read).
	Name string `json:"-"`
	// Partition is the file's partition value, "ts_hour=2024-05-01-10".
	Partition string `json:"partition"`
	Rows      int64  `json:"rows"`
	Bytes     int64  `json:"bytes"`
}

// Partition is one partition value of a table's current snapshot.
type Partition struct {
	Name  string `json:"name"`
	Files int    `json:"files"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Table loads topic's table and lists its current snapshot's data files
// with the table's own scan planning: the files a snapshot references,
// never a directory listing, which would count files nobody committed (a
// killed or fenced worker's) and files a compaction replaced. It fails
// with ErrNoTable when the catalog has no such table.
func (c *Catalog) Table(ctx context.Context, topic string) (*Table, error) {
	id := c.cat.Identifier(topic)
	tbl, err := c.cat.Catalog().LoadTable(ctx, id)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil, fmt.Errorf("%w %s in the catalog", ErrNoTable, strings.Join(id, "."))
	}
	if err != nil {
		return nil, fmt.Errorf("lakeread: table %s: %w", strings.Join(id, "."), err)
	}
	spec := tbl.Spec()
	t := &Table{
		Identifier:       strings.Join(id, "."),
		Location:         tbl.Location(),
		MetadataLocation: tbl.MetadataLocation(),
		Spec:             strings.Join(strings.Fields(spec.String()), " "), // one line
	}
	for _, f := range tbl.Schema().Fields() {
		t.Columns = append(t.Columns, f.Name)
	}
	current := tbl.CurrentSnapshot()
	if current != nil {
		t.CurrentSnapshotID = current.SnapshotID
	}
	for _, s := range tbl.Metadata().Snapshots() {
		t.Snapshots = append(t.Snapshots, snapshotOf(s, t.CurrentSnapshotID))
	}
	slices.SortStableFunc(t.Snapshots, func(a, b Snapshot) int { return a.Time.Compare(b.Time) })
	if t.Groups, err = groupsOf(tbl, topic, t.Snapshots); err != nil {
		return nil, err
	}
	if current == nil {
		return t, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("lakeread: the files of %s: %w", t.Identifier, err)
	}
	partitions := map[string]*Partition{}
	for _, task := range tasks {
		df := task.File
		f := DataFile{Location: df.FilePath(), Rows: df.Count(), Bytes: df.FileSizeBytes(),
			Partition: partitionName(tbl, df)}
		if name, ok := strings.CutPrefix(strings.TrimPrefix(f.Location, "file://"), c.warehouse+"/"); ok {
			f.Name = name
		}
		t.Files = append(t.Files, f)
		p := partitions[f.Partition]
		if p == nil {
			p = &Partition{Name: f.Partition}
			partitions[f.Partition] = p
		}
		p.Files++
		p.Rows += f.Rows
		p.Bytes += f.Bytes
		t.Rows += f.Rows
		t.Bytes += f.Bytes
	}
	slices.SortFunc(t.Files, func(a, b DataFile) int { return cmp.Compare(a.Location, b.Location) })
	for _, name := range slices.Sorted(maps.Keys(partitions)) {
		t.Partitions = append(t.Partitions, *partitions[name])
	}
	return t, nil
}

func snapshotOf(s table.Snapshot, current int64) Snapshot {
	out := Snapshot{ID: s.SnapshotID, Time: time.UnixMilli(s.TimestampMs).UTC(), Summary: map[string]string{},
		Current: s.SnapshotID == current}
	if s.ParentSnapshotID != nil {
		out.ParentID = *s.ParentSnapshotID
	}
	if s.Summary != nil {
		out.Operation = string(s.Summary.Operation)
		for k, v := range s.Summary.Properties {
			out.Summary[k] = v
		}
	}
	return out
}

// partitionName prints a data file's partition value under the spec it
// was written with: "ts_hour=2024-05-01-10", fields joined by "/"; "" for
// an unpartitioned file.
func partitionName(tbl *table.Table, df iceberggo.DataFile) string {
	spec := tbl.Metadata().PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return fmt.Sprintf("spec %d: %v", df.SpecID(), df.Partition())
	}
	values := df.Partition()
	var parts []string
	for _, f := range spec.Fields() {
		typ, ok := tbl.Schema().FindTypeByID(f.SourceID())
		v := values[f.FieldID]
		s := fmt.Sprint(v)
		switch {
		case v == nil:
			s = "null"
		case ok:
			s = f.Transform.ToHumanStrType(typ, v)
		}
		parts = append(parts, f.Name+"="+s)
	}
	return strings.Join(parts, "/")
}

// tableFiles selects the table's data files whose partition directory
// (dt=…/hr=… after the table's data/) meets the query's range, in path
// order, and returns the newest of them (of all, when none is selected).
func tableFiles(t *Table, q *Query) (selected []string, newest string, err error) {
	for _, f := range t.Files {
		if f.Name == "" {
			return nil, "", fmt.Errorf("lakeread: table %s lists %s, outside its warehouse directory", t.Identifier, f.Location)
		}
		newest = f.Name
		if _, rest, ok := strings.Cut(f.Name, "/data/"); ok {
			if start, end, ok := lake.ParseBucket(rest); ok && !q.overlaps(start, end) {
				continue
			}
		}
		selected = append(selected, f.Name)
	}
	if newest == "" {
		return nil, "", fmt.Errorf("%w in table %s (no committed snapshot yet)", ErrNoFiles, t.Identifier)
	}
	return selected, newest, nil
}

// groupsOf reads the progress of every group whose offsets some snapshot
// records, newest first.
func groupsOf(tbl *table.Table, topic string, snapshots []Snapshot) ([]GroupProgress, error) {
	names := map[string]bool{}
	for _, s := range snapshots {
		for k := range s.Summary {
			if g, ok := strings.CutPrefix(k, offsetsPrefix); ok {
				if g, ok = strings.CutSuffix(g, "."+topic); ok && g != "" {
					names[g] = true
				}
			}
		}
	}
	var out []GroupProgress
	for _, g := range slices.Sorted(maps.Keys(names)) {
		p, err := iceberg.ReadProgress(tbl, g, topic)
		if err != nil {
			return nil, fmt.Errorf("lakeread: %w", err)
		}
		if p.SnapshotID == 0 {
			continue // expired with no tag left: nothing to tell
		}
		gp := GroupProgress{Group: g, SnapshotID: p.SnapshotID, Offsets: p.Offsets, Watermarks: p.Watermarks}
		if s := tbl.SnapshotByID(p.SnapshotID); s != nil {
			gp.Time = time.UnixMilli(s.TimestampMs).UTC()
		}
		out = append(out, gp)
	}
	slices.SortStableFunc(out, func(a, b GroupProgress) int { return b.Time.Compare(a.Time) })
	return out, nil
}
