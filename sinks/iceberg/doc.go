// Package iceberg holds millrace's Apache Iceberg table operations, through
// github.com/apache/iceberg-go: opening a catalog, a table per topic, and
// the exactly-once commit of a roll.
//
//   - Catalogs ([Open], [Config]): iceberg-go's SQL catalog on an embedded
//     SQLite file (modernc.org/sqlite, no cgo; the default), the same catalog
//     on PostgreSQL (pgx), or a client of an Iceberg REST catalog. Tables'
//     data and metadata go to a directory or to an S3 bucket, with the
//     sink's S3 store settings.
//   - Tables ([Catalog.Table]): one per topic in a namespace, with the
//     schema of the topic's sink schema ([Schema]: field IDs assigned depth
//     first in column order, so the same schema always has the same IDs and
//     an appended field takes the next) and a partition spec
//     ([PartitionSpec]: hour(<event time>) by default; day, identity on a
//     field, or none).
//   - Commits ([Catalog.CommitRoll]): the data files millrace already wrote
//     under deterministic names (never Transaction.Append, which names files
//     with random UUIDs) are added with Transaction.AddDataFiles in one
//     transaction per roll, with the group's offsets and deduplication
//     watermarks in the snapshot summary (millrace.offsets.<group>.<topic>,
//     millrace.watermarks.<group>.<topic>). [ReadProgress] reads them back
//     from the newest snapshot that has them: the table, not the group, is
//     the source of truth for where a worker starts.
//
// # Why a commit lands exactly once
//
// A commit lands a range [From, To) of offsets for each partition its
// worker holds. It is accepted only if, in the snapshot it was built on,
// the table's offset of each of those partitions equals the range's From
// (the fence, checkRanges), and that snapshot is still the head of the main
// branch when the catalog applies it: the transaction asserts the branch's
// snapshot ID (AssertRefSnapshotID), which the catalog checks and swaps
// atomically (the SQL catalog's UPDATE … WHERE metadata_location = <read>,
// a REST catalog's 409), and commit retries are off (a retry would replay
// the commit onto a newer head without the fence). So every accepted commit
// starts each of its partitions exactly where the previous accepted commit
// left it: the ranges of a partition in the table are contiguous and never
// overlap, and every offset below the table's offset is in the table once.
//
// A zombie (a worker paused past its session while its partitions moved to
// a new owner) cannot break this. If the new owner committed first, the
// zombie's commit either carries a stale head (the catalog refuses it:
// [ErrConflict]) or a fresh head whose offsets are not its From
// ([ErrZombie]); [Catalog.Rebase] tells the two cases after a conflict: a
// conflict that moved only other workers' partitions is rebased and
// committed again, one that moved this worker's partitions means it lost
// them, and it stops. If the zombie commits first, its range is simply the
// next one, and the new owner, whose start is now stale, gets [ErrZombie]
// in turn. Either way each offset lands once. [ErrZombie] means "this roll
// cannot land": the worker drops it and, if the group still gives it the
// partition, starts again from the table's offset ([ReadProgress]); the
// dropped roll's files are referenced by no snapshot and are left to the
// orphan sweep.
//
// A commit whose outcome the catalog leaves unknown (a dropped connection)
// is resolved by reloading the table: each attempt writes a random ID into
// its snapshot summary, and finding it among the snapshots after the one it
// was built on means it landed.
//
// The sink worker (sinks/lake, format: iceberg) commits each landed window
// through CommitRoll (sinks/lake/tablecommit.go).
package iceberg
