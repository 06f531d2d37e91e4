package lake

import (
	"fmt"
	"strconv"
	"strings"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"millrace/schemas"
	"millrace/sinks/iceberg"
)

// Identity partitioning (iceberg.partition "identity:<field>"): the table
// is partitioned by the value of one field, and a data file holds one
// partition value. So the lander splits a window's files by the row's
// value as well as by its time bucket (coreRecord.value), and the commit
// gives each file its value (iceberg.DataFileWithIdentity): a Parquet
// footer's statistics cannot be trusted for it (strings are truncated,
// nulls have none). Files keep their deterministic names: two files of a
// window in one bucket start at different offsets, and a file's first row
// fixes its value, so a name still holds the same rows (doc.go).

// identityValue is a row's value of the identity partition's source field.
type identityValue struct {
	// key tells values apart in the lander ("" is no identity partition):
	// a string quoted, a number or bool as written, null as null.
	key string
	// value is the partition value for the table: string, int64, bool,
	// or nil for null.
	value any
}

// identityField is the source field of identity partitioning, "" for any
// other partitioning.
func (tc TableConfig) identityField() string {
	p, field, _ := strings.Cut(tc.Partition, ":")
	if p != string(iceberg.PartitionIdentity) {
		return ""
	}
	return field
}

// validateIdentity checks the identity partition's field against s: it
// must be a field of s of a type whose values are partition values.
func (tc TableConfig) validateIdentity(s *schemas.Schema) error {
	name := tc.identityField()
	if name == "" {
		return nil
	}
	f, ok := s.Field(name)
	if !ok {
		return fmt.Errorf("lake: iceberg.partition %q: schema %s has no field %q", tc.Partition, s.Name, name)
	}
	switch f.Type {
	case schemas.TypeString, schemas.TypeInt64, schemas.TypeBool:
		return nil
	}
	return fmt.Errorf("lake: iceberg.partition %q: field %q is a %v; identity partitioning takes a string, int64 or bool field "+
		"(hour or day partition by time)", tc.Partition, name, f.Type)
}

// identityOf is row's value of the identity partition's field (w.identity).
// A string is copied (Get): the value outlives the row.
func (w *Worker) identityOf(row *schemas.Row) *identityValue {
	switch v := row.Get(w.identity).(type) {
	case string:
		return &identityValue{key: strconv.Quote(v), value: v}
	case int64:
		return &identityValue{key: strconv.FormatInt(v, 10), value: v}
	case bool:
		return &identityValue{key: strconv.FormatBool(v), value: v}
	default: // absent or null (validateIdentity allows no other type)
		return &identityValue{key: "null"}
	}
}

// checkSpec fails when tbl is not partitioned as tc asks: the worker cuts
// its files by tc (a data file must hold one partition value of the
// table's spec), and a table's spec is set when it is created, so a
// changed iceberg.partition would make files the table cannot take.
func (tc TableConfig) checkSpec(tbl *table.Table, timeField string) error {
	p, field, _ := strings.Cut(tc.Partition, ":")
	want, err := iceberg.PartitionSpec(iceberg.Partitioning(p), tbl.Schema(), timeField, field)
	if err != nil {
		return fmt.Errorf("lake: table %v: %w", tbl.Identifier(), err)
	}
	if have := tbl.Spec(); !have.CompatibleWith(&want) {
		return fmt.Errorf("lake: table %v is partitioned by %s and iceberg.partition %q asks for %s; "+
			"an existing table keeps its spec: set iceberg.partition to the table's", tbl.Identifier(), specString(have), tc.Partition, specString(want))
	}
	return nil
}

// specString shows a spec on one line.
func specString(spec iceberggo.PartitionSpec) string {
	if spec.IsUnpartitioned() {
		return "nothing"
	}
	return strings.Join(strings.Fields(spec.String()), " ")
}
