package lake

import (
	"context"
	"errors"
	"fmt"
	"strings"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"millrace/sinks/iceberg"
	"millrace/store"
)

// The dead-letter table of Format iceberg (doc.go, "Dead letters"): a
// window's dead letters are committed to the topic's `<topic>~dlq` table
// before its files are committed to the topic's table. The dead-letter
// table's snapshots carry the group's offsets too
// (millrace.offsets.<group>.<topic>), with their own meaning: every dead
// letter of a partition below its offset is in the table, and none at or
// above it. A commit adds the window's dead letters at or above that
// offset, in one file, and moves the offset to the window's end; it is
// built on the table's head and asserts it, like every commit. So a
// window landed again after a crash between the two commits skips the
// dead letters the first attempt committed, and each lands once.

// commitDeadLetters lands wc's dead-letter rows in its topic's dead-letter
// table. Rows the table already has (offset below its offset for the
// partition) are skipped; when none is left, nothing is committed.
func (c *tableCommitter) commitDeadLetters(ctx context.Context, wc windowCommit) error {
	tbl, err := c.deadLetterTable(ctx, wc.tp.topic)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		cm, rows, err := c.planDeadLetters(tbl, wc)
		if err != nil || len(rows) == 0 {
			return err
		}
		df, err := c.writeDeadLetters(ctx, tbl, wc.tp, rows)
		if err != nil {
			return err
		}
		cm.Files = append(cm.Files, df)
		committed, err := c.catalog.CommitRoll(ctx, tbl, cm)
		if err == nil {
			c.setDeadLetterTable(wc.tp.topic, committed)
			return nil
		}
		fresh, rerr := c.catalog.Reload(ctx, tbl)
		if rerr != nil {
			return errors.Join(err, rerr)
		}
		c.setDeadLetterTable(wc.tp.topic, fresh)
		if !errors.Is(err, iceberg.ErrConflict) || attempt == maxRebases {
			return err
		}
		// Another commit won the compare-and-swap (another partition's
		// dead letters, or a former owner's of this one): plan again on
		// the head, which skips what that commit added.
		tbl = fresh
	}
}

// planDeadLetters is the commit of wc's dead letters that tbl does not
// have yet, and those rows; no rows when it has them all.
func (c *tableCommitter) planDeadLetters(tbl *table.Table, wc windowCommit) (iceberg.Commit, []iceberg.DeadLetterRow, error) {
	progress, err := iceberg.ReadProgress(tbl, c.group, wc.tp.topic)
	if err != nil {
		return iceberg.Commit{}, nil, err
	}
	from, ok := progress.Offsets[wc.tp.partition]
	if !ok {
		from = wc.start
	}
	rows := wc.deadLetterRows
	for len(rows) > 0 && rows[0].Offset < from {
		rows = rows[1:]
	}
	if len(rows) == 0 {
		return iceberg.Commit{}, nil, nil
	}
	cm := iceberg.Commit{Group: c.group, Topic: wc.tp.topic,
		Ranges: map[int32]iceberg.Range{wc.tp.partition: {From: from, To: wc.next}}}
	return cm, rows, nil
}

// writeDeadLetters writes rows as one file of the dead-letter table tbl,
// named by the partition and the offsets of its first and last row, and
// describes it for the commit. Two files of one name hold the same rows
// (the rows between two offsets of a partition that the table did not
// have), so a name already taken counts as written.
func (c *tableCommitter) writeDeadLetters(ctx context.Context, tbl *table.Table, tp topicPartition, rows []iceberg.DeadLetterRow) (iceberggo.DataFile, error) {
	name := fmt.Sprintf("%s%s/%s", tp.topic, iceberg.DeadLetterSuffix,
		FileName(tp.partition, rows[0].Offset, rows[len(rows)-1].Offset))
	obj, err := c.store.Create(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lake: create %s: %w", name, err)
	}
	defer obj.Abort(ctx) // after Publish, a no-op
	if _, _, err := iceberg.WriteDeadLetters(obj, tbl, rows); err != nil {
		return nil, fmt.Errorf("lake: %s: %w", name, err)
	}
	if err := obj.Publish(ctx); err != nil && !errors.Is(err, store.ErrExists) {
		return nil, fmt.Errorf("lake: publish %s: %w", name, err)
	}
	return c.dataFile(ctx, tbl, tp.topic+iceberg.DeadLetterSuffix, name, nil, nil)
}

// deadLetterTable returns the head of topic's dead-letter table, loaded
// (or created) on its first use: a topic without dead letters has none.
// Its location must be where tableStore writes its files, beside the
// topic's table.
func (c *tableCommitter) deadLetterTable(ctx context.Context, topic string) (*table.Table, error) {
	c.mu.Lock()
	tbl, main := c.deadLetterTables[topic], c.tables[topic]
	c.mu.Unlock()
	if tbl != nil {
		return c.catalog.Reload(ctx, tbl)
	}
	tbl, err := c.catalog.DeadLetterTable(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	want := strings.TrimSuffix(main.Location(), "/") + iceberg.DeadLetterSuffix
	if strings.TrimSuffix(tbl.Location(), "/") != want {
		return nil, fmt.Errorf("lake: table %v is at %s; the sink writes its files under %s", tbl.Identifier(), tbl.Location(), want)
	}
	c.setDeadLetterTable(topic, tbl)
	return tbl, nil
}

func (c *tableCommitter) setDeadLetterTable(topic string, tbl *table.Table) {
	c.mu.Lock()
	if c.deadLetterTables == nil {
		c.deadLetterTables = map[string]*table.Table{}
	}
	c.deadLetterTables[topic] = tbl
	c.mu.Unlock()
}
