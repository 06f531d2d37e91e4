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
//     field, or none). Opening a table evolves its schema to take the
//     sink's ([Catalog.Evolve], below); [Catalog.DeadLetterTable] opens
//     the topic's <topic>~dlq table for the records it cannot take.
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
// TestIcebergSinkGroup (e2e) shows the refused case with real processes: a
// sink worker stopped between publishing a roll's file and committing it,
// its partitions taken over, then continued (sinks/lake/doc.go).
//
// A commit whose outcome the catalog leaves unknown (a dropped connection)
// is resolved by reloading the table: each attempt writes a random ID into
// its snapshot summary, and finding it among the snapshots after the one it
// was built on means it landed.
//
// # Schema evolution
//
// A table's schema follows the sink's schema forward and never rewrites a
// data file. [Catalog.Evolve] pairs the sink's fields with the table's
// columns by name: a field the table lacks becomes an optional column
// (rows already in the table read it as null) with the table's next field
// ID (Iceberg's last-column-id plus one), and existing columns keep
// theirs; a column widens only as Iceberg allows (int to long, float to
// double, a decimal's precision at the same scale); a required column may
// become optional. Anything else (a narrowing or any other type change,
// a new required field, a required column the sink no longer fills) is
// refused with [ErrIncompatibleSchema], naming the field and both types,
// and nothing is committed; the records such a schema describes belong in
// the topic's dead-letter table (topic, partition, offset, raw bytes,
// reason, record time), where the sink lands a record its schema refuses
// (sinks/lake/doc.go, "Dead letters"). A field the sink drops stays in
// the table, so workers on an older and a newer schema version can share
// it.
//
// The sink's Parquet files carry no field IDs: readers map their columns
// to the table's by the table's name mapping (schema.name-mapping.default).
// It is set when the table is created and updated by each evolution in
// the same commit, so a file written with a new column reads it; were it
// left to Transaction.AddDataFiles, a roll committed from a copy of the
// table loaded before the change would set it from the old schema.
//
// The change is a commit of its own that asserts the main branch's head
// and the current schema, with no retries inside iceberg-go, like a roll's
// commit. When it fails because the table moved (another worker evolved it
// the same way, or a roll landed), Evolve reloads the table and plans
// again: the other worker's column is then found, so concurrent workers
// converge on one schema, with no column added twice or lost. A schema
// change makes no snapshot, so a roll built on the table before it still
// passes its own ref assertion, lands, and leaves the new schema in place.
//
// # Maintenance
//
// Three operations keep a table fast and its storage bounded; each takes
// the table and may run while workers commit.
//
//   - [Catalog.Compact] merges the small files of closed partitions (an
//     hour, or a day, that ended a safety age ago) into files of up to a
//     target size, 128 MiB by default. A merged file holds its inputs'
//     rows unchanged and in order, and is named by a hash of the files it
//     replaces, so a compaction that crashed or lost a race and runs again
//     writes the same object. The commit is a rewrite (a "replace"
//     snapshot) that asserts the main branch's head, exactly as a roll
//     does, and carries the progress properties of the snapshot it was
//     built on; so it neither moves nor hides any group's offsets, a
//     reader sees the table before or after it, never between, and a roll
//     that races it gets [ErrConflict], rebases (no offsets moved) and
//     commits again, while a compaction that loses plans again on the
//     fresh table.
//   - [Catalog.Expire] drops snapshots older than a retention (7 days by
//     default) and the files only they referenced. It first points each
//     group's tag ([OffsetsTag], millrace-offsets.<group>.<topic>) at the
//     newest snapshot holding that group's offsets: a tagged snapshot is
//     never expired, and [ReadProgress] falls back to the tag when expiry
//     has cut the branch's history short of it.
//   - [Catalog.RemoveOrphans] deletes the files under the table's data
//     location that no snapshot references and that are older than a
//     safety age (1 hour by default): a zombie's refused roll, a crashed
//     or superseded compaction's output. The age keeps it off files
//     written for a commit still in flight; references are read from
//     every snapshot, so a file an older snapshot still needs (a
//     compaction's inputs, until expiry) stays.
//
// [Catalog.Maintain] runs the three in that order, which frees the most:
// expiry deletes the small files a compaction replaced once the snapshots
// that still referenced them age out. A sink runs it on a schedule, from
// the worker holding partition 0 of the topic (sinks/lake/maintain.go);
// `millrace lake compact|expire|orphans` runs each by hand, with a dry run
// ([CompactOptions], [ExpireOptions] and [OrphanOptions] DryRun).
//
// The sink worker (sinks/lake, format: iceberg) commits each landed window
// through CommitRoll (sinks/lake/tablecommit.go).
package iceberg
