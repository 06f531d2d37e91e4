package iceberg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

var (
	// ErrConflict is returned by Commit when the table moved since the
	// caller loaded it: the compare-and-swap on the catalog failed and
	// nothing was committed. Rebase says whether to try again.
	ErrConflict = errors.New("iceberg: commit conflict: the table moved since it was loaded")
	// ErrZombie is returned when the table's offsets of a partition the
	// commit covers are not where the commit starts: another owner landed
	// that partition's records. The caller has lost the partition and must
	// stop; its files are left to the orphan sweep.
	ErrZombie = errors.New("iceberg: the table's offsets moved past this worker: its partitions have another owner")
)

// Range is the offsets of one partition a commit lands: From is the
// offset its files start at (the table's offset when the worker read it),
// To the next offset after them.
type Range struct {
	From, To int64
}

// Commit is one roll of one worker to land in a topic's table.
type Commit struct {
	// Group and Topic name the progress properties the commit moves.
	Group, Topic string
	// Files are the roll's data files, already written (see DataFile).
	Files []iceberg.DataFile
	// Ranges maps each partition the worker holds to what the files land of it.
	Ranges map[int32]Range
	// Watermarks are the deduplication watermarks of the worker's
	// partitions after the roll (UTF-8 text, opaque here); partitions not
	// named keep theirs.
	Watermarks map[int32]string
}

// CommitRoll lands c in tbl in one transaction that asserts tbl's snapshot
// is still the main branch's head, and returns the table after it. Every
// partition's From must equal the table's offset for the group (a
// partition the table has no offset for takes any From).
//
// It returns an error wrapping ErrZombie when a partition's offset is
// elsewhere, and ErrConflict when the catalog refused the compare-and-swap
// (call Rebase). Nothing is retried here: a retry onto a newer snapshot is
// only safe after Rebase checked the offsets again.
func (c *Catalog) CommitRoll(ctx context.Context, tbl *table.Table, cm Commit) (*table.Table, error) {
	base, err := ReadProgress(tbl, cm.Group, cm.Topic)
	if err != nil {
		return nil, err
	}
	if err := checkRanges(base, cm.Ranges); err != nil {
		return nil, err
	}
	offsets := maps.Clone(base.Offsets)
	for part, r := range cm.Ranges {
		offsets[part] = r.To
	}
	watermarks := maps.Clone(base.Watermarks)
	maps.Copy(watermarks, cm.Watermarks)
	encWatermarks, err := encodeWatermarks(watermarks)
	if err != nil {
		return nil, err
	}
	id, err := commitID()
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{
		offsetsKey(cm.Group, cm.Topic):    encodeOffsets(offsets),
		watermarksKey(cm.Group, cm.Topic): encWatermarks,
		commitIDProperty:                  id,
	}

	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, fmt.Errorf("iceberg: assert the main branch: %w", err)
	}
	if len(cm.Files) == 0 {
		// A roll whose records were all duplicates or dead letters still
		// moves the offsets: an empty append commits a snapshot of its own.
		err = tx.AddFiles(ctx, nil, props, false)
	} else {
		// No duplicate check: it reads every manifest of the table, and the
		// offsets' fence already lets a range (and so its files) land once.
		err = tx.AddDataFiles(ctx, cm.Files, props, table.WithoutDuplicateCheck())
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: stage the commit of %s: %w", cm.Topic, err)
	}
	committed, err := tx.Commit(ctx)
	if err == nil {
		return committed, nil
	}
	return c.afterFailedCommit(ctx, tbl, id, err)
}

// afterFailedCommit tells what a failed commit left. The SQL catalog
// reports a stale requirement as a plain error and a lost race as
// table.ErrCommitFailed; a dropped connection may hide a commit that
// landed. So the table is reloaded and looked at: a snapshot of this
// attempt's ID after the one it was built on means the commit landed; a
// moved head, or the catalog's own conflict error, is a conflict; anything
// else failed without committing.
func (c *Catalog) afterFailedCommit(ctx context.Context, tbl *table.Table, id string, cause error) (*table.Table, error) {
	fresh, err := c.Reload(ctx, tbl)
	if err != nil {
		return nil, fmt.Errorf("iceberg: commit of %v failed (%w), and its outcome is unknown: %w", tbl.Identifier(), cause, err)
	}
	baseID := headSnapshotID(tbl)
	moved := headSnapshotID(fresh) != baseID
	if moved {
		meta := fresh.Metadata()
		for s := meta.SnapshotByName(table.MainBranch); s != nil && s.SnapshotID != baseID; {
			if s.Summary != nil && s.Summary.Properties[commitIDProperty] == id {
				return fresh, nil
			}
			if s.ParentSnapshotID == nil {
				break
			}
			s = meta.SnapshotByID(*s.ParentSnapshotID)
		}
	}
	if moved || errors.Is(cause, table.ErrCommitFailed) {
		return nil, fmt.Errorf("%w (%v: %w)", ErrConflict, tbl.Identifier(), cause)
	}
	return nil, fmt.Errorf("iceberg: commit of %v: %w", tbl.Identifier(), cause)
}

// Rebase reloads the table after ErrConflict and says whether cm may be
// committed again on it: an error wrapping ErrZombie when the commit that
// won moved the offsets of a partition cm covers (stop), else the fresh
// table to call CommitRoll with (another worker's partitions moved).
func (c *Catalog) Rebase(ctx context.Context, tbl *table.Table, cm Commit) (*table.Table, error) {
	fresh, err := c.Reload(ctx, tbl)
	if err != nil {
		return nil, err
	}
	current, err := ReadProgress(fresh, cm.Group, cm.Topic)
	if err != nil {
		return nil, err
	}
	if err := checkRanges(current, cm.Ranges); err != nil {
		return nil, err
	}
	return fresh, nil
}

// checkRanges is the fence: each range must start where the table's
// offset of its partition is.
func checkRanges(p Progress, ranges map[int32]Range) error {
	var moved []int32
	for part, r := range ranges {
		if r.To < r.From {
			return fmt.Errorf("iceberg: partition %d: range [%d, %d) ends before it starts", part, r.From, r.To)
		}
		if at, ok := p.Offsets[part]; ok && at != r.From {
			moved = append(moved, part)
		}
	}
	if len(moved) > 0 {
		slices.Sort(moved)
		return fmt.Errorf("%w: partitions %v are at offsets %s in snapshot %d", ErrZombie, moved, encodeOffsets(p.Offsets), p.SnapshotID)
	}
	return nil
}

// headSnapshotID is the main branch's snapshot ID, 0 before the first commit.
func headSnapshotID(tbl *table.Table) int64 {
	if s := tbl.Metadata().SnapshotByName(table.MainBranch); s != nil {
		return s.SnapshotID
	}
	return 0
}

// commitID is a random ID for one commit attempt. It names no file, so its
// randomness costs the exactly-once argument nothing.
func commitID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
