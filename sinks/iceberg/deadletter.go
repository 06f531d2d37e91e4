package iceberg

import (
	"context"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// DeadLetterSuffix ends the name of a topic's dead-letter table: records of
// topic "clicks" the table cannot take land in "clicks~dlq", as Redpanda's
// Iceberg topics name theirs.
const DeadLetterSuffix = "~dlq"

// The dead-letter table's columns.
const (
	// DeadLetterPartition is the Kafka partition the record came from (int).
	DeadLetterPartition = "partition"
	// DeadLetterOffset is the record's offset in it (long).
	DeadLetterOffset = "offset"
	// DeadLetterRaw is the record's value as the sink read it (binary).
	DeadLetterRaw = "raw"
	// DeadLetterReason says why the table could not take it (string).
	DeadLetterReason = "reason"
	// DeadLetterTime is the Kafka record's timestamp (timestamptz), not the
	// time it was dead-lettered: a roll replayed after a crash must write
	// the same rows, as every other file of the sink does.
	DeadLetterTime = "time"
)

// DeadLetterSchema is the schema of a dead-letter table. Partition and
// offset are required: they are how a record is found again in its topic.
func DeadLetterSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: DeadLetterPartition, Type: iceberg.PrimitiveTypes.Int32, Required: true,
			Doc: "Kafka partition of the record"},
		iceberg.NestedField{ID: 2, Name: DeadLetterOffset, Type: iceberg.PrimitiveTypes.Int64, Required: true,
			Doc: "offset of the record in its partition"},
		iceberg.NestedField{ID: 3, Name: DeadLetterRaw, Type: iceberg.PrimitiveTypes.Binary,
			Doc: "the record's value, as read"},
		iceberg.NestedField{ID: 4, Name: DeadLetterReason, Type: iceberg.PrimitiveTypes.String, Required: true,
			Doc: "why the topic's table could not take the record"},
		iceberg.NestedField{ID: 5, Name: DeadLetterTime, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true,
			Doc: "the Kafka record's timestamp"},
	)
}

// DeadLetterTable loads topic's dead-letter table (topic + DeadLetterSuffix),
// creating it when it does not exist. It is partitioned by day of the
// record time: dead letters are few, and hourly files of them would be
// mostly empty. Its rolls commit with CommitRoll like the topic's own.
func (c *Catalog) DeadLetterTable(ctx context.Context, topic string) (*table.Table, error) {
	sc := DeadLetterSchema()
	return c.loadOrCreate(ctx, topic+DeadLetterSuffix, sc, func() (iceberg.PartitionSpec, error) {
		return PartitionSpec(PartitionDay, sc, DeadLetterTime, "")
	})
}
