package iceberg

import (
	"fmt"

	"github.com/apache/iceberg-go"

	"millrace/schemas"
)

// Partitioning names a table's partition spec.
type Partitioning string

// The partition specs a table may have.
const (
	// PartitionHour is hour(<event time>): the default, as an hour is what the
	// audit reconciles and a roll lands.
	PartitionHour Partitioning = "hour"
	// PartitionDay is day(<event time>), for topics too small for hourly files.
	PartitionDay Partitioning = "day"
	// PartitionIdentity partitions by the value of one field (Config's
	// PartitionField).
	PartitionIdentity Partitioning = "identity"
	// PartitionNone leaves the table unpartitioned.
	PartitionNone Partitioning = "none"
)

// firstPartitionFieldID is where Iceberg numbers partition fields from.
const firstPartitionFieldID = 1000

// PartitionSpec returns the spec p names over schema, whose time field is
// timeField; field names the identity partition's source.
func PartitionSpec(p Partitioning, sc *iceberg.Schema, timeField, field string) (iceberg.PartitionSpec, error) {
	if p == "" {
		p = PartitionHour
	}
	var source string
	var transform iceberg.Transform
	switch p {
	case PartitionNone:
		return *iceberg.UnpartitionedSpec, nil
	case PartitionHour:
		source, transform = timeField, iceberg.HourTransform{}
	case PartitionDay:
		source, transform = timeField, iceberg.DayTransform{}
	case PartitionIdentity:
		source, transform = field, iceberg.IdentityTransform{}
	default:
		return iceberg.PartitionSpec{}, fmt.Errorf("iceberg: partitioning %q: want hour, day, identity or none", p)
	}
	f, ok := sc.FindFieldByName(source)
	if !ok {
		return iceberg.PartitionSpec{}, fmt.Errorf("iceberg: partitioning %s: no field %q", p, source)
	}
	name := source
	if p != PartitionIdentity {
		name = source + "_" + string(p) // Iceberg's own naming: ts_hour, ts_day
	}
	id := firstPartitionFieldID
	return iceberg.NewPartitionSpecOpts(iceberg.AddPartitionFieldBySourceID(f.ID, name, transform, sc, &id))
}

// specFor is PartitionSpec for a sink schema and a table config.
func specFor(s *schemas.Schema, sc *iceberg.Schema, cfg TableConfig) (iceberg.PartitionSpec, error) {
	return PartitionSpec(cfg.Partitioning, sc, s.TimeField, cfg.PartitionField)
}
