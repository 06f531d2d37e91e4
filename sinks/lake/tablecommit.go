package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/store"
)

// tableCommitter is the committer of Format iceberg (doc.go, "Iceberg
// tables"): a window's files, already published under their deterministic
// names in the table's data directory, are added to the topic's table in
// one snapshot whose summary carries the group's offsets and watermarks
// (iceberg.CommitRoll). The table is the source of truth: a worker starts
// each partition at the table's offset (startOffsets), and after each table
// commit the group offset is committed too (group), so the group's offsets
// follow the table's.
type tableCommitter struct {
	catalog *iceberg.Catalog
	group   string
	store   store.Store // the worker's (a tableStore): where the files are read back from
	next    committer   // the group offset commit after the table's
	logger  *slog.Logger

	// committing is held through a table commit and through startOffsets:
	// with the commit pipeline (pipeline.go) a window's commit may still
	// run when a rebalance reads the table's offsets of new partitions,
	// and the reload must come after the commit, not under it, so the
	// table the next commits build on is never older than the last one.
	committing sync.Mutex

	mu     sync.Mutex // guards the following
	tables map[string]*table.Table
	// deadLetterTables are the topics' dead-letter tables, loaded on
	// their first dead letter (tabledeadletter.go).
	deadLetterTables map[string]*table.Table
	// from is, per partition, the offset the next commit starts at: the
	// table's offset when the partition was assigned, then the end of each
	// commit. A partition the table had no offset for starts at its first
	// window's start.
	from map[topicPartition]int64
}

// maxRebases bounds the rebases of one commit: each one means another
// worker of the group committed in between, which a handful of workers
// cannot do forever.
const maxRebases = 20

// openTables opens the catalog of cfg and every topic's table, creating
// those that do not exist, for a worker whose store is st (catalogConfig).
func openTables(ctx context.Context, cfg Config, st store.Store, s *schemas.Schema, logger *slog.Logger) (*iceberg.Catalog, map[string]*table.Table, error) {
	cc, err := cfg.Iceberg.catalogConfig(st, logger)
	if err != nil {
		return nil, nil, err
	}
	cat, err := iceberg.Open(ctx, cc)
	if err != nil {
		return nil, nil, fmt.Errorf("lake: %w", err)
	}
	tables := map[string]*table.Table{}
	for _, topic := range cfg.Topics {
		tbl, err := cat.Table(ctx, topic, s, cfg.Iceberg.tableConfig())
		if err != nil {
			cat.Close()
			return nil, nil, fmt.Errorf("lake: %w", err)
		}
		// The worker writes <warehouse>/<namespace>.db/<topic>/data/…
		// (tableStore); a table elsewhere (a REST catalog's choice, one made
		// by hand) would list files it cannot find.
		want := cfg.Iceberg.warehouseURL() + "/" + cfg.Iceberg.namespace() + ".db/" + topic
		if strings.TrimSuffix(tbl.Location(), "/") != want {
			cat.Close()
			return nil, nil, fmt.Errorf("lake: table %v is at %s; the sink writes its files under %s", tbl.Identifier(), tbl.Location(), want)
		}
		tables[topic] = tbl
	}
	return cat, tables, nil
}

// commit lands wc in its topic's table, then commits the group offset.
func (c *tableCommitter) commit(ctx context.Context, wc windowCommit) error {
	c.committing.Lock()
	err := c.commitTable(ctx, wc)
	c.committing.Unlock()
	if err != nil {
		return err
	}
	// The window is landed: the table says so. A failed group commit (the
	// partition is being revoked) only leaves the group behind the table,
	// which every start reads first.
	if err := c.next.commit(ctx, wc); err != nil {
		c.logger.Warn("the group offset did not follow the table's; the table's is the one a worker starts from",
			"topic", wc.tp.topic, "partition", wc.tp.partition, "offset", wc.next, "err", err)
	}
	return nil
}

// commitTable lands wc in its topic's table. The caller holds
// c.committing.
func (c *tableCommitter) commitTable(ctx context.Context, wc windowCommit) error {
	c.mu.Lock()
	tbl := c.tables[wc.tp.topic]
	from, ok := c.from[wc.tp]
	c.mu.Unlock()
	if !ok {
		from = wc.start
	}
	cm := iceberg.Commit{Group: c.group, Topic: wc.tp.topic,
		Ranges: map[int32]iceberg.Range{wc.tp.partition: {From: from, To: wc.next}}}
	if md := encodeWatermark(wc.watermark); md != "" {
		cm.Watermarks = map[int32]string{wc.tp.partition: md}
	}
	// Dead letters first: once the topic's table is past a window, the
	// window is never landed again, so its dead letters must already be in
	// their table (doc.go, "Dead letters").
	if len(wc.deadLetterRows) > 0 {
		if err := c.commitDeadLetters(ctx, wc); err != nil {
			return err
		}
	}
	for _, f := range wc.files {
		df, err := c.dataFile(ctx, tbl, wc.tp.topic, f.name, f.identity, f.footer)
		if err != nil {
			return err
		}
		cm.Files = append(cm.Files, df)
	}
	committed, err := c.catalog.CommitRoll(ctx, tbl, cm)
	for i := 0; errors.Is(err, iceberg.ErrConflict) && i < maxRebases; i++ {
		// Another commit won the compare-and-swap. If it moved this
		// partition, this worker is a zombie: Rebase says so (ErrZombie)
		// and the worker stops, its files left to the orphan sweep.
		c.logger.Info("table commit conflict; rebasing", "topic", wc.tp.topic, "partition", wc.tp.partition, "next", wc.next)
		rebased, rerr := c.catalog.Rebase(ctx, tbl, cm)
		if rerr != nil {
			err = rerr
			break
		}
		tbl = rebased
		committed, err = c.catalog.CommitRoll(ctx, tbl, cm)
	}
	if err != nil {
		if fresh, rerr := c.catalog.Reload(ctx, tbl); rerr == nil {
			c.setTable(wc.tp.topic, fresh) // the next attempt starts from the head
		}
		return err
	}
	c.mu.Lock()
	c.tables[wc.tp.topic] = committed
	c.from[wc.tp] = wc.next
	c.mu.Unlock()
	return nil
}

func (c *tableCommitter) setTable(topic string, tbl *table.Table) {
	c.mu.Lock()
	c.tables[topic] = tbl
	c.mu.Unlock()
}

// dataFile describes the published file name (a Layout name) for tbl, with
// the statistics of its footer and its partition value: identity's when
// the file has one, else the footer's. The footer is the writer's when
// given; the file is opened all the same, so that a file missing since it
// was published (swept by a maintenance run while this worker was paused:
// maintain.go, minOrphanAge) fails the commit instead of entering the
// table, and read back from it otherwise.
func (c *tableCommitter) dataFile(ctx context.Context, tbl *table.Table, topic, name string, identity *identityValue,
	footer *metadata.FileMetaData) (iceberggo.DataFile, error) {
	r, err := c.store.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lake: read back %s: %w", name, err)
	}
	defer r.Close()
	if footer == nil {
		pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, r.Size()))
		if err != nil {
			return nil, fmt.Errorf("lake: footer of %s: %w", name, err)
		}
		defer pf.Close()
		footer = pf.MetaData()
	}
	location := strings.TrimSuffix(tbl.Location(), "/") + "/data/" + strings.TrimPrefix(name, topic+"/")
	if identity != nil {
		return iceberg.DataFileWithIdentity(tbl, location, r.Size(), footer, identity.value)
	}
	return iceberg.DataFile(tbl, location, r.Size(), footer)
}

// startOffsets is the kgo.AdjustFetchOffsetsFn of Format iceberg: each
// assigned partition the table has an offset for starts there, whatever
// the group committed (a crash between the table's commit and the group's
// leaves the group behind); the others start at the group's offset.
func (c *tableCommitter) startOffsets(ctx context.Context, assigned map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	c.committing.Lock()
	defer c.committing.Unlock()
	for topic, partitions := range assigned {
		c.mu.Lock()
		tbl := c.tables[topic]
		c.mu.Unlock()
		if tbl == nil {
			continue
		}
		fresh, err := c.catalog.Reload(ctx, tbl)
		if err != nil {
			return nil, err
		}
		progress, err := iceberg.ReadProgress(fresh, c.group, topic)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.tables[topic] = fresh
		for part := range partitions {
			tp := topicPartition{topic, part}
			if at, ok := progress.Offsets[part]; ok {
				partitions[part] = kgo.NewOffset().At(at).WithEpoch(-1)
				c.from[tp] = at
			} else {
				delete(c.from, tp)
			}
		}
		c.mu.Unlock()
		c.logger.Info("start offsets from the table", "topic", topic, "offsets", progress.Offsets, "snapshot", progress.SnapshotID)
	}
	return assigned, nil
}

// evolve gives every topic's table the columns of s, a later version of
// the schema they have (a registry-typed sink's evolution, registry.go).
// An error wrapping iceberg.ErrIncompatibleSchema means a table has a
// column of a new field's name with another type.
func (c *tableCommitter) evolve(ctx context.Context, s *schemas.Schema, tc TableConfig) error {
	c.mu.Lock()
	topics := make([]string, 0, len(c.tables))
	for topic := range c.tables {
		topics = append(topics, topic)
	}
	c.mu.Unlock()
	for _, topic := range topics {
		tbl, err := c.catalog.Table(ctx, topic, s, tc.tableConfig())
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.tables[topic] = tbl
		c.mu.Unlock()
	}
	return nil
}
