// Package lake is millrace's Parquet sink: a consumer-group worker that lands
// topics as Hive-partitioned Parquet files on a filesystem or S3, or as
// Apache Iceberg tables (format: iceberg, below), exactly once
// (docs/architecture.md §8).
//
// # Layout
//
// Each row goes to the file of its time bucket, the UTC hour (or day) of its
// event time — the schema's time field, or Config.TimestampField, with the
// record's timestamp as the fallback:
//
//	<root>/<topic>/dt=YYYY-MM-DD/hr=HH/part-<partition>-<first offset>-<last offset>.parquet
//	<root>/<topic>/dt=YYYY-MM-DD/part-<partition>-<first offset>-<last offset>.parquet   (partition_by: day)
//
// The offsets are those of the file's first and last row, zero-padded to 20
// digits, so a directory listing sorts files by offset within a partition. Layout
// (layout.go) is this definition, which the lake's readers (sinks/lakeread,
// pipeline/reconcile) use too.
//
// # Commit windows and exactly-once output
//
// A worker handles each assigned partition as a sequence of commit windows. A
// window starts at the partition's committed offset (the first record the
// group hands out after it) and collects records until it ends; each time
// bucket seen in the window gets one file, named by the offsets of the
// bucket's first and last record in the window. Files are written under a
// temporary identity (a hidden temporary file, or a local spool file for S3)
// and published atomically and without ever replacing a name (fsync + link,
// or a PUT / multipart completion with If-None-Match: *). When a window ends,
// ALL its files are published, any dead-letter records are acknowledged, and
// only THEN is the group offset committed, to the offset after the window's
// last record.
//
// Why this lands every record exactly once, whatever happens between two
// steps: after a crash (or a rebalance that discarded unpublished work) the
// next owner starts again at the committed offset C and reads the same
// records. Files of committed windows hold only rows before C (a window's
// rows end before the offset it commits). Any file with a row at or after C
// — its last offset is >= C — was published by an attempt that never
// committed it. So the first time the new owner opens a file in a bucket
// after its assignment, before it publishes anything there, it lists the
// partition's files in that bucket's directory and removes those whose last
// offset is >= C (fence.go). Every such file is found in time: its rows are
// records at or after C of that bucket, so the new owner opens the bucket
// when it reaches the first of them, before its commit can move past it. It
// then lands those records itself. No record is in two files, and no
// committed file is touched. A file whose first offset is before C and whose
// last is at or after it cannot come from a crashed attempt (which started
// at C); it comes from a superseded owner (below) and goes too: its rows
// before C are in the committed files.
//
// Two files of one name hold the same rows: the name gives the bucket, the
// partition and the offsets of the first and last row, and the rows are the
// records of that bucket between them (which records are dropped — dead
// letters, skipped batches, repeats — depends on the records alone). So a
// publish that finds its name taken has nothing to add, and counts as done;
// cut points that differ between attempts give other names, never a
// different file under the same name.

// # Where windows end
//
// The argument above holds for any cut points, but the cut points that come
// from the records alone are deterministic, so a rewrite usually has the
// same names as the lost copy: a window ends
//   - after RollRows rows;
//   - when the files' estimated size reaches RollBytes (checked every 1,024
//     rows, from the writers' own estimate, which depends on the rows only);
//   - before the first record whose record timestamp is RollAge or more after
//     the window's first record timestamp (roll-age is measured in record
//     time, not on the wall clock, so it does not depend on when the worker
//     happened to read the records);
//   - before a record that needs a new file when the worker already has
//     MaxOpenFiles open files (late data for many old hours ends the window
//     early instead of opening unbounded writers);
//   - with Format iceberg, after the dead letter that brings the window's
//     dead letters to 16 MiB (they are held in memory; "Dead letters").
//
// Four cuts depend on the wall clock or on other partitions, and are exactly
// once by the removal argument alone: the idle timeout (a window whose
// partition has delivered nothing for IdleTimeout is ended, so a quiet
// partition lands promptly — the explicit flush a wall-clock roll age would
// give, without making the other cut points depend on the clock), the
// open-file cap when another partition holds the files, a revoke (publish,
// then commit, in OnPartitionsRevoked), and shutdown. A lost partition (session expired) is discarded without commit.
//
// Leftovers of a crashed worker (temporary files, unfinished uploads of an
// interrupted publish) are removed when their partition is assigned, by
// store.Cleanup with a match on the name pattern of that partition; whatever
// they held is rewritten. (An S3 worker's local spool files of a crash stay
// in its os.TempDir().)
//
// # Superseded owners
//
// A worker paused past its session timeout (a long GC, SIGSTOP, a VM
// migration) is removed from the group while it still holds windows; its
// partitions move to another member, which lands the same records in
// windows cut elsewhere and commits. When the paused worker resumes, its
// idle timeout, a revoke or the open-file cap may end a window before its
// client has noticed. Three things keep it from changing the lake:
//   - before each file it publishes, and before removing files as above, the
//     worker sends the group coordinator a Heartbeat with the member id and
//     generation its client holds, and that member id must be the one the
//     partition was assigned to (a client that lost its member rejoins under
//     a new id, maybe before the worker ran its lost-partitions callback);
//     ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or another id
//     mean the partition may be another member's: the worker discards the
//     window, publishing and committing nothing ("publish refused" in its
//     log), and stops like after a failed commit, so its next start reads
//     from the committed offsets (going on would let a later window's
//     commit skip the discarded records, were the refusal ever wrong).
//     REBALANCE_IN_PROGRESS still owns: no partition moves before its
//     member rejoined or its session expired. A check that gets no answer
//     stops the worker too;
//   - a publish never replaces a name, so a late file can never take the
//     place of the new owner's (whose rows would be lost), and one of the
//     same name holds the same rows;
//   - removals list first and check the generation after, so a former owner
//     only ever removes files that existed while it still owned the
//     partition.
//
// Its temporary files may be gone too (the new owner's Cleanup), which fails
// a late publish on the filesystem.
//
// What remains: a pause longer than the session timeout (plus the
// rebalance and the new owner's landing) that falls exactly between a
// passed check and the store operation it guards — the single link(2), PUT
// or completion request, or a removal. A late publish then adds a file
// whose rows the new owner also lands (each such row twice, never lost);
// it is removed if its range reaches the committed offset when the
// partition is next assigned, and stays otherwise. A late removal can take
// away a file the new owner published under the same name since (those
// rows lost). Nothing in S3 or POSIX fences a write by a token the group
// hands out, so only a store with conditional deletes and a fencing token
// per object could close this; with the default 45 s session it needs a
// 45 s stall inside one request. On an S3 server that ignores
// If-None-Match a late publish of a taken name replaces the file (same
// rows when the range matches; otherwise the window above).
//
// # Iceberg tables
//
// With Config.Format iceberg each topic is an Apache Iceberg table of a
// catalog (sinks/iceberg; Config.Iceberg), and the same files land in the
// table's data directory, <warehouse>/<namespace>.db/<topic>/data/dt=…/hr=…/
// part-….parquet (tableStore), under the same deterministic names; the
// warehouse is the store's root, a directory or an S3 bucket prefix, and
// the table's own file IO reaches a bucket with the store's settings
// (catalogConfig). Only the
// commit changes (tablecommit.go): a window is landed when its files are
// added to the table in one snapshot (iceberg.CommitRoll) whose summary
// carries the group's offset and watermark of every partition it landed;
// the group offset is committed after it and only follows. The table is
// the source of truth: a worker assigned a partition starts at the table's
// offset when the table has one (a crash between the two commits leaves
// the group behind), else at the group's.
//
// Why this is exactly once, and closes the gap the Hive path admits above
// (a pause between a passed check and the store operation it guards):
//   - Visibility. Readers see only the files a snapshot lists. A file no
//     commit took (a crashed attempt's, a zombie's) sits in the data
//     directory, invisible, for the orphan sweep; a rewrite that finds its
//     name taken holds the same rows.
//   - The fence. A window's commit lands the range [From, To) of its
//     partition, From being the table's offset when the partition was
//     assigned, then the previous commit's To. iceberg.CommitRoll builds it
//     only if the table's offset of the partition is From in the snapshot
//     it builds on, and the catalog applies it only if that snapshot is
//     still the main branch's head: the transaction asserts it
//     (AssertRefSnapshotID), the catalog checks and swaps atomically (the
//     SQL catalog's conditional UPDATE, a REST catalog's 409), and nothing
//     is retried. So the ranges a partition's commits land are contiguous
//     and disjoint: every offset below the table's is in the table once.
//   - The table first. A worker starts an assigned partition at the
//     table's offset, not the group's (startOffsets); the group offset is
//     committed after the table's and only follows it, so a crash between
//     the two lands nothing twice.
//   - Concurrent workers. The workers of a group commit to one table. A
//     commit that loses the compare-and-swap to another worker's is rebased
//     (iceberg.Catalog.Rebase: the winner moved only other partitions, so
//     the fence holds on the new head too) and committed again, up to
//     maxRebases times: no commit is lost to another's.
//
// A zombie is a worker paused past its session timeout (SIGSTOP, a long
// GC, a VM migration) between writing a window's files and committing
// them, while its partitions moved to a new owner that lands the same
// records, in windows cut elsewhere, and commits. When it resumes, its
// commit either comes before the new owner's, and its range is simply the
// next one (the new owner's commit then finds the table past its start,
// ErrZombie, and that worker stops and starts again from the table), or
// after: then it was built on a snapshot that is no longer the head, the
// catalog refuses it (ErrConflict), and the rebase finds the partition's
// offset moved (ErrZombie). The zombie stops without committing (its
// Runner starts a new worker, which rejoins the group and starts from the
// table), and the files it published are listed by no snapshot: orphans,
// removed by the sweep once older than its safety age. Nothing is landed
// twice, and nothing is lost: the new owner landed from the table's offset,
// which the zombie never moved. The e2e test TestIcebergSinkGroup shows it
// against real processes, on SQLite with a directory and on PostgreSQL
// with S3: three workers of a group on six partitions, one stopped right
// after publishing a window's file and before its table commit, its
// partitions taken over and landed past, another SIGKILLed and restarted;
// continued, the stopped worker's commit is refused by the catalog and it
// is replaced, its file stays in the data directory unlisted, the table
// holds every record once, and the snapshot's offsets are the group's.
//
// Superseded files are not removed on this path (the removal above could
// take a file a zombie then commits): they stay, unreferenced, for the
// orphan sweep. _SUCCESS markers are not written: a snapshot is the
// completion.
//
// A data file holds one partition value of the table's spec, so the files
// follow it: hour files for hour(<event time>) and for none, day files for
// day. A table partitioned by identity on a field (tablepartition.go)
// takes day files split by the field's value too: the lander keys a
// window's files by bucket and value (coreRecord.value), and the commit
// gives each file its value. The naming argument above is unchanged: a
// file's first row fixes its value, so two files of one name still hold
// the same rows. The sink refuses to start when the table's spec is not
// the one it is configured for (an existing table keeps its spec).

// # Dedup
//
// With Dedup on (the default), a record whose event_id repeats one the
// partition remembers is read but not landed (dedup.go). Two kinds of id
// are recognised: the tailer's (32 lower-case hex digits, 16 naming the
// file and 16 the line's byte offset), dropped when the offset is at or
// below the largest offset of that file remembered; and UUIDs (the beacon's),
// dropped when the same UUID is remembered. Any other id, or none, passes and
// is counted (millrace_lake_records_without_id_total; drops are
// millrace_lake_duplicates_dropped_total; both per source and hour in the
// audit records, as "deduplicated" and "no_id").
//
// What a partition remembers is a pure function of its records: the last
// DedupMaxIDs records with an id among those read within DedupWindow of
// record time, where time is the partition clock, the largest record
// timestamp read so far. Every record with an id is remembered, dropped or
// not, so what is remembered never depends on earlier decisions. Record
// time, not event time, because the broker can find it (ListOffsets by
// timestamp), which makes the rebuild below exact, and because a repeat is a
// re-send: both copies carry the same event time, the second arrives later.
// For the tailer this means a file's watermark lasts as long as the file
// writes within DedupMaxIDs records or DedupWindow of record time; lines
// re-sent after a tailer was down for longer than that land twice, and the
// audit shows them.
//
// Decisions therefore depend only on the partition's records before the
// one decided, never on where windows were cut or which worker read them,
// and the naming argument above is unchanged: replace "record" by "landed
// record". A dropped record is dropped by every attempt, so the first
// landed record of a bucket after the committed offset is the same for
// every attempt and names the same file; when the first record of a bucket
// in a window is a repeat, the file is named by the next record of that
// bucket that is landed. A window may end up with no file at all (every
// record a repeat); it is committed like any other.
//
// A worker that is assigned a partition rebuilds the state before landing
// its first record, at the committed offset C: the commit's metadata holds
// the largest record time of the window before C, at most the clock at C,
// so every record with a timestamp older than it minus DedupWindow is
// forgotten at C by every worker; the worker lists the first offset at or
// after that time, reads from there up to C with direct Fetch requests given
// to franz-go's own fetch processing (so it sees the records the group's
// client delivered, and skips undecodable and malformed batches as the
// worker did), and decides each record without landing it
// (millrace_lake_dedup_records_reread_total). Nothing is stored besides what
// the offsets already store, so the state survives crashes and rebalances
// exactly like the offsets. The rebuild is exact unless retention deleted
// records of the stretch, or the commit has no record time (a window of
// skipped batches only); a failed read (after two minutes at most) keeps
// what was read. The worker then logs a warning and some repeats may be
// landed. A partition with no committed offset starts with nothing
// remembered.
//
// The tailer's watermark assumes that every line of a file reaches one
// partition in order: the tailer's default key, "{host}:{path}" with the path
// the file was first found at (kept in its registry for the file's life,
// across renames and restarts), does that; `key: none` does not, and with it
// dedup must be off for the topic, or a line re-sent to another partition
// could fall below that partition's watermark of its file and be dropped
// unlanded. Adding partitions to a topic moves keys: repeats across the
// change may land.
//
// # Records of several rows
//
// With the otel-* schemas (Config.Schema otel-logs, otel-spans,
// otel-metrics) a record is an OTLP export request and holds many log
// records, spans or data points, each a row (schemas/otel; rows.go). The
// lander decides such a record as one (coreRecord.rows): the rows, age
// and open-file cuts come before it, the rows cut after it, and the bytes
// check after its last row, so a record's rows are in the files of one
// window, published and committed together; a window still ends at a
// record boundary, its commit is the offset after its last record, and
// the argument above holds with "record" read as "the record's rows". A
// file's name carries the offsets of its first and last rows' records:
// rows of one record in one bucket share an offset, and two files of one
// name still hold the same rows, as the rows of a record and their order
// depend on its bytes alone.
//
// Dedup decides each row, in the record's order, after the record's time
// is observed; the rebuild replays rows the same way (replayRows), so the
// state stays a function of the records. A row's id: a log record's
// event_id attribute (the UUID the OTLP receiver adds), a span's trace
// and span IDs, a data point's whole content (otel.Rows.Key: data points
// carry no ID, and a point equal in series, times and values is the same
// point sent again). A record whose rows are all repeats, or which holds
// none, lands nothing and moves the window past it. A record that does
// not decode is one dead letter.
//
// # _SUCCESS markers
//
// Every commit carries the window's largest record timestamp in the offset's
// commit metadata (`{"wm":<unix ms>}`). Periodically, a worker that published
// files into an hour (or day) — or, when it was assigned the topic, found one
// with files and no marker within a day of the group's position, as a worker
// that stopped leaves them — fetches the group's committed offsets and the
// partitions' end offsets: a partition's position is its committed metadata
// time, or now when it is fully consumed (committed offset = end offset). Once
// the minimum position over all partitions of the topic is at or past the end
// of the bucket plus SuccessGrace, the worker publishes
// `<bucket dir>/_SUCCESS` (empty). Positions are in record time; an event
// whose own time is far older than its record time can still land in a bucket
// after its marker.
//
// # Dead letters
//
// Records whose value is empty or does not fit the schema are produced to
// `<topic>.dlq` as a JSON envelope (reason, topic, partition, offset, record
// timestamp, the value's length, and the value as a string when it is valid
// UTF-8, else base64), by the idempotent producer, and acknowledged before
// the window's commit. The envelope carries at most the value's first 128
// KiB (marked truncated), so that escaping or base64 cannot grow it past the
// producer's or the broker's size limit and stall the partition. A
// crash before the commit produces them again: the dead-letter topic is at
// least once, and the envelope's topic/partition/offset identify duplicates.
//
// With Format iceberg dead letters go to a table, not a topic: each is a
// row of the topic's `<topic>~dlq` table (iceberg.DeadLetterSchema: topic,
// partition, offset, the whole raw value, the reason, the record time; a
// skipped batch below has its last offset, no value, and its codec's error
// in the reason), and no `<topic>.dlq` topic is written or made. The rows
// are kept with their window and committed when it lands, in one snapshot
// of the dead-letter table that comes BEFORE the topic table's snapshot of
// the same window (tabledeadletter.go), and they are exactly once too. The
// dead-letter table's snapshots carry the group's offsets
// (millrace.offsets.<group>.<topic>) with this meaning: every dead letter
// of a partition below the offset is in the table, and none at or above
// it. A window's commit reads that offset D from the table's head, keeps
// its dead letters at or above D, writes them as one file named by the
// partition and the offsets of its first and last row, and commits it with
// the range [D, window end), asserting the head it read; a commit that
// loses the compare-and-swap reads the new head and plans again. So the
// table's ranges of a partition are contiguous and never overlap, and no
// dead letter is in it twice. None is missing either: the topic table's
// offset passes a dead letter only in the commit of a window that holds
// it, and that window committed it to the dead-letter table first (or
// found it there). After a crash between the two commits, the window is
// landed again from the topic table's offset, whatever its cuts: its dead
// letters below D are skipped, the others added. A window without dead
// letters commits nothing there, so D may lag the topic table's offset;
// the next range simply starts lower, over offsets that had none. Two
// files of one name hold the same rows (the dead letters between two
// offsets the table did not have), so a publish that finds its name taken
// counts as done; files of failed commits are left to the orphan sweep.
// The rows of a window are held in memory until it lands, so a window
// whose dead letters reach 16 MiB (values and reasons) lands there: a cut
// that depends on the records only, like the others, and the one that
// ends a stream of nothing but dead letters, which rows, bytes and age,
// counting rows, never end.
// One limit is the schema's: a worker restarted with a schema that takes a
// record an earlier attempt dead-lettered (and committed there, without
// the topic table's commit) lands it in both tables.
//
// # Registry-typed topics
//
// With Config.Schema registry the values are Confluent-framed and typed by
// the schema registry (registry.go): the columns are the top-level fields
// of the subject's latest schema when the worker starts, and a record
// whose schema adds fields lands every open window (reason "schema")
// before the schema, and with Format iceberg the table, gain the columns.
// That cut depends on the records only for the partition that saw the
// record, and on timing for the others, like the open-file cap; the
// removal argument covers it. Records that are not framed, whose schema ID
// is unknown or whose values do not decode or fit are dead letters like
// any other. A registry that cannot be reached fails the worker (nothing
// is dead-lettered or committed), and the next start lands the records
// from the committed offset. The limit of the paragraph above applies
// with more force: which records are rows depends on the schema the
// worker started with, which a registration can change between two
// starts.
//
// # Undecodable batches
//
// A batch is decompressed with a bound (MaxDecompressedBatchBytes). A batch
// that decompresses past it, or whose records cannot be decompressed at all
// (junk under a valid CRC, an unknown codec), would stop the partition for
// good; instead it is sent to `<topic>.dlq` as one envelope (reason
// "undecodable batch", its first and last offset, the codec's error, its
// size, codec and claimed record count) and skipped: the fetch position
// moves past its last offset, and the skipped offsets count in the window
// like dead-lettered records — the envelope is acknowledged before the
// window's commit, and sent again (same topic/partition/offset) if the
// commit is lost. Whether a batch is skipped depends only on its bytes in
// the log (replicas hold the same bytes) and on the bound, which every
// worker of a group must share, so every owner skips the same offsets and
// lands the same records around them: the argument above is unchanged,
// and a skip never adds a file.
//
// # Malformed batches
//
// A batch that decompresses but whose records are malformed, or which
// claims more records than it holds, makes the client stop at it without
// an error once it is the last batch a fetch returns (stall.go). A
// partition that delivers nothing for StallTimeout while its end offset is
// beyond the worker's position is therefore checked: the batches at the
// position are read with a direct Fetch and run through the client's own
// fetch processing; only a batch the client stops at AND the broker's
// produce validator (internal/recordbatch) refuses is dead-lettered
// (reason "malformed batch", the validator's error) and skipped, from the
// client's position to the batch's last offset, exactly as above. A quiet
// partition (end offset at the position) is never read, and a slow one
// (the client would deliver a record from the bytes read) is waited for.
// The decision depends only on the log's bytes, never on when the check
// ran, and the skipped offsets are ones the client never delivers (it
// stops decoding a batch at its first bad record; records before it are
// landed): every owner lands the same records, so the argument above is
// unchanged. Only the dead letter depends on timing: when records follow
// the batch in the same fetch before the check runs, the client moves past
// it on its own and no dead letter is sent (the landed records are the
// same). A batch that decompresses past the broker's default
// millrace.max.decompressed.bytes (64 MiB) is never judged here.
//
// # Audit
//
// Every data file's footer carries `millrace.audit.rows`, its rows per
// source and hour ({"<hour>":{"<source>":rows}}, audit.MetaRows), so
// `millrace audit` counts what the lake holds from the footers alone and a
// file deleted by hand is noticed. Before each commit, after the files are
// published, the worker publishes to `_millrace.audit` (AuditTopic) one
// record per source and hour the window touched, keyed
// sink/<group>/<topic>/<partition>/<topic>/<source>/<hour>, with its
// cumulative rows landed, repeats dropped, rows without id and records
// dead-lettered, and the offset it commits next; it waits for their
// acknowledgement like the dead letters'. Why these numbers are exact
// across crashes: every count is a function of the partition's records
// below that offset (landing, dead-lettering and dedup decisions depend on
// the records only), so any two records of one key with the same offset
// agree, and the one with the larger offset is the newer count — the
// reconciler keeps it, which also makes a zombie's late record harmless.
// A new owner starts from, per key, the record with the largest offset not
// past the offset its first window starts at (the committed one; every
// window up to it published before committing), and records of a window
// that was never committed are ignored, so a crash republishes the same
// numbers instead of adding them twice. The records of undecodable or
// malformed batches cannot be attributed to a source and are not counted:
// their hour shows as not reconciled, which is the truth.
//
// # Core and worker
//
// The decisions above are the lander's (core.go), a state machine without
// I/O in the style of broker/replica: events go in — a record the worker
// has classified (a row of a bucket, a dead letter, a repeat), a poll's
// clock, an undecodable batch skipped, the files' size, a tick, a revoke,
// a lost partition, shutdown, a failure — and actions come out, in order:
// open a bucket's file (clearing a superseded owner's files first when it
// is the bucket's first opening since the assignment), append a row, send
// a dead letter, drop a repeat, land a window (publish, then commit) or
// discard it. Golden traces (testdata/*.golden; go test -update rewrites
// them) pin every cut: rows, bytes, record-time age, the open-file cap,
// idle, revoke, loss, shutdown and failure. The worker (worker.go,
// actions.go) does what the actions name: decoding, dedup (the pure set of
// dedupset.go), Parquet writing, the store, the fence checks, the audit and
// the commit. It runs them in order and stops at the first failure, so the
// lander can assume every action succeeds; what the failure left undone is
// discarded.
//
// Two locks split what one used to do. The landing lock (w.landing)
// serialises landings: the poll loop's, the revoke callback's (a revoked
// partition is landed, publish then commit, before the callback returns),
// the lost callback's discards, Shutdown's and a failure's. It is held
// through a landing's I/O in order, so within one landing the fence check
// still comes before each publish and the commit after the last one, and
// a revoke that Shutdown's timeout path runs while the poll loop is still
// landing waits for that landing instead of interleaving with it. It guards
// the lander and every partition's windows. The state lock (w.mu) guards
// what others read or write while a landing runs: which partitions are
// assigned, the buckets waiting for markers and Err's answer. It is held
// for a few map operations and never across store, network or Kafka I/O,
// so Err, the assignment bookkeeping and the marker bookkeeping never wait
// for a landing; it is taken after the landing lock, never before. Nothing
// replays under either lock: a newly assigned partition's dedup set is
// rebuilt (rebuild.go) before its first records are handed to the lander,
// the lock taken only to look and to set. An undecodable batch is read for
// its dead letter's description before the landing lock is taken; a
// silent partition's stall check (stall.go) lists offsets and reads the
// batch at its position between two holds of it, and acts on the verdict
// only if the partition is still assigned at that position. The
// assignment's cleanup, the search for due markers and the marker writes
// hold no lock.
//
// A window's end is made durable in one step, the committer (commit.go):
// once every file of the window is published, its dead letters and audit
// records acknowledged, the worker gives the committer the partition, the
// offset after the window, the window's record-time watermark and the
// files it published (names, buckets, row ranges, sizes). Today's
// committer commits the group offset with the watermark in its metadata.
// Another, such as an Iceberg table commit that adds the window's files in
// one snapshot whose properties carry the offsets, is another
// implementation of that interface: it is handed the same window at the
// same point, after publishing and before anything treats the window as
// landed, so the argument above is unchanged as long as it commits
// atomically and a repeated commit of one window (after a crash between
// its commit and the group's) is recognised by the offsets it carries.
// The lander, the publishing and the fence do not change.
//
// # The commit off the landing path
//
// With Format iceberg a window's commit (the table's, then the group's)
// runs on a goroutine of its own while the landing goroutine writes the
// next window's rows (pipeline.go): a table commit writes a manifest, a
// manifest list and a metadata file and swaps the catalog's pointer, time
// in which an in-line commit would write no row. The argument above needs
// only that a partition's commits are made in window order, each after the
// previous one succeeded, and that nothing is given up while one runs. So:
// at most one commit is in flight, and the next window publishes nothing
// until it has ended; a failed commit is kept, and the window written
// meanwhile and every later one are discarded unpublished, and the worker
// stops (below) to start again from the table's offset; shutdown, a revoke,
// a loss, a failure and a schema change wait for the commit in flight, and
// a rebalance's reading of the table's offsets waits for it in the
// committer. The audit totals and the markers a commit makes due are
// updated on the landing goroutine when it has ended, before the next
// window's audit records are published. TestPipelineFailedCommitDiscardsTheNextWindow
// fails the commit of one window, before and after the catalog takes it,
// while the next window is being written: the next is never published,
// and a worker started again from the table lands every record once.
//
// # Failures
//
// A failed write, publish or commit stops the worker (Err reports why): the
// window's unpublished objects are discarded and the records are landed again
// from the committed offset by the next owner or the next start. Continuing
// after a failed commit would start a window beyond the committed offset,
// which breaks the argument above. A Runner makes that next start: it shuts
// the stopped worker down, which leaves the group, and starts a new one after
// a backoff of 1 s doubling to 1 min.
package lake
