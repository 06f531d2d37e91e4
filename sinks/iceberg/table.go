package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"millrace/schemas"
)

// TableConfig is the shape of a topic's table.
type TableConfig struct {
	// Partitioning is the partition spec; default PartitionHour.
	Partitioning Partitioning
	// PartitionField is the source field of PartitionIdentity.
	PartitionField string
}

// tableProperties are set on every table the sink creates.
var tableProperties = iceberg.Properties{
	// Version 2 is what every engine named in docs/lake.md reads, and its
	// data files need no first-row IDs (AddDataFiles requires them on v3).
	table.PropertyFormatVersion: "2",
	// The commit's compare-and-swap must fail, not be replayed onto a newer
	// snapshot: a replay would land a zombie's files (see doc.go). 0 is
	// iceberg-go's default; it is written down so no default can change it.
	table.CommitNumRetriesKey: "0",
}

// Identifier returns the identifier of topic's table.
func (c *Catalog) Identifier(topic string) table.Identifier {
	return table.Identifier{c.cfg.Namespace, topic}
}

// Table loads topic's table, creating it from s when it does not exist. It
// fails when the table's field IDs disagree with the ones Schema gives s.
func (c *Catalog) Table(ctx context.Context, topic string, s *schemas.Schema, tc TableConfig) (*table.Table, error) {
	want, err := Schema(s)
	if err != nil {
		return nil, err
	}
	id := c.Identifier(topic)
	tbl, err := c.catalog.LoadTable(ctx, id)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		spec, serr := specFor(s, want, tc)
		if serr != nil {
			return nil, serr
		}
		tbl, err = c.catalog.CreateTable(ctx, id, want,
			catalog.WithPartitionSpec(&spec), catalog.WithProperties(tableProperties))
		if errors.Is(err, catalog.ErrTableAlreadyExists) {
			// Another worker of the group created it first.
			tbl, err = c.catalog.LoadTable(ctx, id)
		} else if err == nil {
			c.cfg.Logger.Info("iceberg: created table", "table", id, "partitioning", spec.String())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", topic, err)
	}
	if err := checkFieldIDs(tbl.Schema(), want); err != nil {
		return nil, fmt.Errorf("iceberg: table %s: %w", topic, err)
	}
	return tbl, nil
}

// Reload loads tbl's current metadata from the catalog.
func (c *Catalog) Reload(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	fresh, err := c.catalog.LoadTable(ctx, tbl.Identifier())
	if err != nil {
		return nil, fmt.Errorf("iceberg: reload %v: %w", tbl.Identifier(), err)
	}
	return fresh, nil
}
