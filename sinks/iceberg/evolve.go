package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// ErrIncompatibleSchema is returned by Evolve (and Catalog.Table) when the
// table cannot take the sink's schema under Iceberg's evolution rules: a
// column's type would narrow or change, a required field would be added,
// or a required column would be left without values. Nothing is committed;
// the records such a schema describes belong in the topic's dead-letter
// table.
var ErrIncompatibleSchema = errors.New("iceberg: the table cannot take the sink schema")

// maxEvolveAttempts bounds Evolve's reload-and-retry loop. Each retry
// follows a commit that moved the table (another worker's roll or schema
// change), so a handful of concurrent workers settle in a few attempts.
const maxEvolveAttempts = 10

// evolution is what a table's schema needs to take a sink's schema.
type evolution struct {
	// adds are the columns the table lacks, in the sink schema's order;
	// they are added optional, so rows written before read them as null.
	adds []iceberg.NestedField
	// widen are the table's columns whose type widens (int→long,
	// float→double, a decimal's precision); Type is the new type.
	widen []iceberg.NestedField
	// relax are the table's required columns the sink may leave null.
	relax []string
}

func (e evolution) empty() bool {
	return len(e.adds) == 0 && len(e.widen) == 0 && len(e.relax) == 0
}

// planEvolution compares the table's schema have with the sink's schema
// want, top-level field by field and by name, and says what have needs.
// It never removes a column: a field the sink no longer has stays in the
// table (optional columns read as null in new rows), so a worker running
// an older version of the schema and one running a newer one can share a
// table. Names, not field IDs, pair the two: the table assigned the IDs
// (an added column takes the table's next ID, whatever want numbered it),
// and the table's name mapping is what reads the sink's files, which carry
// no field IDs.
func planEvolution(have, want *iceberg.Schema) (evolution, error) {
	var e evolution
	for _, f := range want.Fields() {
		got, ok := have.FindFieldByName(f.Name)
		if !ok {
			if f.Required {
				return evolution{}, fmt.Errorf("%w: field %q (%s) is new and required: rows already in the table have no value for it",
					ErrIncompatibleSchema, f.Name, f.Type)
			}
			e.adds = append(e.adds, f)
			continue
		}
		if !sameType(got.Type, f.Type) {
			if !widens(got.Type, f.Type) {
				return evolution{}, fmt.Errorf("%w: field %q is %s in the table and %s in the sink schema: Iceberg widens only int to long, float to double and a decimal's precision",
					ErrIncompatibleSchema, f.Name, got.Type, f.Type)
			}
			got.Type = f.Type
			e.widen = append(e.widen, got)
		}
		if got.Required && !f.Required {
			e.relax = append(e.relax, f.Name)
		}
	}
	for _, f := range have.Fields() {
		if _, ok := want.FindFieldByName(f.Name); !ok && f.Required {
			return evolution{}, fmt.Errorf("%w: the table's column %q (%s) is required and the sink schema has no field %q",
				ErrIncompatibleSchema, f.Name, f.Type, f.Name)
		}
	}
	return e, nil
}

// sameType compares two types without their nested field IDs, which the
// table assigned: a map column the sink schema numbers differently is
// still the same map.
func sameType(a, b iceberg.Type) bool {
	am, aok := a.(*iceberg.MapType)
	bm, bok := b.(*iceberg.MapType)
	if aok || bok {
		return aok && bok && am.ValueRequired == bm.ValueRequired &&
			sameType(am.KeyType, bm.KeyType) && sameType(am.ValueType, bm.ValueType)
	}
	return a.Equals(b)
}

// widens reports whether Iceberg's schema evolution may change a column
// of type from to type to: int to long, float to double, and a decimal to
// a larger precision of the same scale. (iceberg.PromoteType also lets a
// reader take a string as binary; that is not a schema change.)
func widens(from, to iceberg.Type) bool {
	switch f := from.(type) {
	case iceberg.Int32Type:
		_, ok := to.(iceberg.Int64Type)
		return ok
	case iceberg.Float32Type:
		_, ok := to.(iceberg.Float64Type)
		return ok
	case iceberg.DecimalType:
		t, ok := to.(iceberg.DecimalType)
		return ok && t.Scale() == f.Scale() && t.Precision() > f.Precision()
	}
	return false
}

// Evolve makes tbl's schema take want and returns the table after it:
// tbl itself when nothing changes. New fields become optional columns with
// the table's next field IDs, allowed widenings change a column's type in
// place, and the data files are never rewritten. The change is one
// commit of its own, asserting the main branch's head and the current
// schema as a roll's commit does, and it updates the table's name mapping
// in the same commit, so files written with the new columns read them.
//
// When another commit moved the table first (another worker evolving the
// same way, or a roll), Evolve reloads it and plans again: a column the
// other worker added is then found, not added twice, so concurrent
// workers converge on one schema. It returns an error wrapping
// ErrIncompatibleSchema when want cannot be taken.
func (c *Catalog) Evolve(ctx context.Context, tbl *table.Table, want *iceberg.Schema) (*table.Table, error) {
	var lastErr error
	for range maxEvolveAttempts {
		e, err := planEvolution(tbl.Schema(), want)
		if err != nil {
			return nil, fmt.Errorf("iceberg: table %v: %w", tbl.Identifier(), err)
		}
		mapping := tbl.NameMapping()
		if e.empty() && mapping != nil {
			return tbl, nil
		}
		evolved, err := c.commitEvolution(ctx, tbl, e, mapping)
		if err == nil {
			c.cfg.Logger.Info("iceberg: evolved the table's schema", "table", tbl.Identifier(),
				"added", fieldNames(e.adds), "widened", fieldNames(e.widen), "optional", e.relax,
				"schema", evolved.Schema().ID)
			return evolved, nil
		}
		// The commit failed: if the table moved, someone else committed
		// first (or this commit landed and its answer was lost); plan again
		// on what is there now. If it did not move, the failure is not a
		// race and retrying would not help.
		fresh, rerr := c.Reload(ctx, tbl)
		if rerr != nil {
			return nil, fmt.Errorf("iceberg: evolve %v: %w (and reloading failed: %w)", tbl.Identifier(), err, rerr)
		}
		if fresh.MetadataLocation() == tbl.MetadataLocation() {
			return nil, fmt.Errorf("iceberg: evolve %v: %w", tbl.Identifier(), err)
		}
		tbl, lastErr = fresh, err
	}
	return nil, fmt.Errorf("iceberg: evolve %v: the table kept moving after %d attempts: %w", tbl.Identifier(), maxEvolveAttempts, lastErr)
}

// commitEvolution commits e on tbl in one transaction. mapping is the
// table's name mapping, nil when the table has none yet (a table created
// before the sink set one at creation): it is then made from the current
// schema and updated with e, because Transaction.AddDataFiles would
// otherwise set it from whatever schema its caller's copy of the table had.
func (c *Catalog) commitEvolution(ctx context.Context, tbl *table.Table, e evolution, mapping iceberg.NameMapping) (*table.Table, error) {
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, fmt.Errorf("iceberg: assert the main branch: %w", err)
	}
	if mapping == nil {
		mapping = tbl.Schema().NameMapping()
		encoded, err := json.Marshal(mapping)
		if err != nil {
			return nil, err
		}
		if err := tx.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: string(encoded)}); err != nil {
			return nil, err
		}
	}
	if !e.empty() {
		// Case-sensitive names; incompatible changes off, so iceberg-go
		// checks again what planEvolution allowed.
		update := tx.UpdateSchema(true, false, table.WithNameMapping(mapping))
		for _, f := range e.adds {
			update.AddColumn([]string{f.Name}, f.Type, f.Doc, false, nil)
		}
		for _, f := range e.widen {
			update.UpdateColumn([]string{f.Name}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: f.Type, Valid: true}})
		}
		for _, name := range e.relax {
			update.UpdateColumn([]string{name}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Val: false, Valid: true}})
		}
		if err := update.Commit(); err != nil {
			return nil, fmt.Errorf("iceberg: stage the schema change: %w", err)
		}
	}
	return tx.Commit(ctx)
}

func fieldNames(fields []iceberg.NestedField) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}
