package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

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

// Table loads topic's table, creating it from s when it does not exist,
// and evolves its schema to take s (Evolve): a field s has and the table
// lacks becomes a column. It fails, wrapping ErrIncompatibleSchema, when
// the table cannot take s.
func (c *Catalog) Table(ctx context.Context, topic string, s *schemas.Schema, tc TableConfig) (*table.Table, error) {
	want, err := Schema(s)
	if err != nil {
		return nil, err
	}
	tbl, err := c.loadOrCreate(ctx, topic, want, func() (iceberg.PartitionSpec, error) { return specFor(s, want, tc) })
	if err != nil {
		return nil, err
	}
	return c.Evolve(ctx, tbl, want)
}

// loadOrCreate loads topic's table, or creates it with schema sc and the
// partition spec spec returns, under the warehouse the sink writes to. A new table gets its name mapping (column
// name to field ID, which reads the sink's files: they carry no field IDs)
// at creation, so a roll's commit never sets one from a stale schema.
func (c *Catalog) loadOrCreate(ctx context.Context, topic string, sc *iceberg.Schema, spec func() (iceberg.PartitionSpec, error)) (*table.Table, error) {
	id := c.Identifier(topic)
	tbl, err := c.catalog.LoadTable(ctx, id)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		ps, serr := spec()
		if serr != nil {
			return nil, serr
		}
		mapping, merr := json.Marshal(sc.NameMapping())
		if merr != nil {
			return nil, merr
		}
		props := maps.Clone(tableProperties)
		props[table.DefaultNameMappingKey] = string(mapping)
		opts := []catalog.CreateTableOpt{catalog.WithPartitionSpec(&ps), catalog.WithProperties(props)}
		if w := c.cfg.warehouse(); w != "" && c.cfg.Catalog == CatalogREST {
			// A REST catalog places a table in a warehouse of its own
			// unless the request names a location; the sink writes the
			// files under <warehouse>/<namespace>.db/<topic>, which is
			// where the SQL catalog puts it from its warehouse property.
			opts = append(opts, catalog.WithLocation(w+"/"+c.cfg.Namespace+".db/"+topic))
		}
		tbl, err = c.catalog.CreateTable(ctx, id, sc, opts...)
		if errors.Is(err, catalog.ErrTableAlreadyExists) {
			// Another worker of the group created it first.
			tbl, err = c.catalog.LoadTable(ctx, id)
		} else if err == nil {
			c.cfg.Logger.Info("iceberg: created table", "table", id, "partitioning", ps.String())
		}
	}
	if err != nil {
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
