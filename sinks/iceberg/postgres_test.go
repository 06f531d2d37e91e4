package iceberg

import (
	"testing"

	"millrace/internal/pgtest"
)

// TestPostgresCatalog runs the conflict and zombie cases on the SQL catalog
// on PostgreSQL, with two catalog clients as two sink processes would have.
func TestPostgresCatalog(t *testing.T) {
	url := pgtest.Start(t)
	dir := t.TempDir()
	open := func() *Catalog {
		c, err := Open(t.Context(), Config{Catalog: CatalogPostgres, URL: url, Directory: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := open()
	testConflictRebaseOrZombie(t, c1)
	// A second process sees the first one's table and progress.
	tbl := metricsTable(t, open())
	if got := encodeOffsets(progress(t, tbl, "sink").Offsets); got != "0:6,1:3" {
		t.Errorf("offsets seen by a second catalog client %s, want 0:6,1:3", got)
	}
}
