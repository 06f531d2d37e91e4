package iceberg

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// faultyCatalog is the catalog with a fault at commit: after the commit
// (the acknowledgement is lost) or instead of it (the request never
// arrived).
type faultyCatalog struct {
	table.CatalogIO
	commit bool
}

var errConnection = errors.New("connection reset by peer")

func (f faultyCatalog) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if f.commit {
		if _, _, err := f.CatalogIO.CommitTable(ctx, id, reqs, updates); err != nil {
			return nil, "", err
		}
	}
	return nil, "", errConnection
}

// through returns tbl bound to cat for its commits.
func through(tbl *table.Table, cat table.CatalogIO) *table.Table {
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, cat)
}

func TestCommitOutcomeUnknown(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	roll := rows("a", 2, hour0)
	cm := Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, tbl, "p0-0.parquet", roll)},
		Ranges: map[int32]Range{0: {0, 2}},
	}

	// The request never reached the catalog: an error that is neither a
	// conflict nor a zombie, and nothing landed.
	_, err := c.CommitRoll(t.Context(), through(tbl, faultyCatalog{CatalogIO: c.catalog}), cm)
	if !errors.Is(err, errConnection) || errors.Is(err, ErrConflict) || errors.Is(err, ErrZombie) {
		t.Fatalf("commit that never arrived: %v, want the connection error alone", err)
	}
	if fresh, err := c.Reload(t.Context(), tbl); err != nil || fresh.CurrentSnapshot() != nil {
		t.Fatalf("after a commit that never arrived: snapshot %v, err %v; want none", fresh.CurrentSnapshot(), err)
	}

	// The commit landed but its answer was lost: CommitRoll finds it.
	landed, err := c.CommitRoll(t.Context(), through(tbl, faultyCatalog{CatalogIO: c.catalog, commit: true}), cm)
	if err != nil {
		t.Fatalf("commit whose answer was lost: %v, want it found as landed", err)
	}
	if got := encodeOffsets(progress(t, landed, "sink").Offsets); got != "0:2" {
		t.Errorf("offsets %s, want 0:2", got)
	}
	if got, want := scan(t, landed), wantRows(roll); len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}
