package lake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/store"
)

// TestIcebergDeadLetters: with format iceberg, a record the schema refuses
// and an empty one land as rows of the clicks~dlq table (topic, partition,
// offset, raw bytes, reason, time), the records around them in the clicks
// table, each once; the dead-letter table's snapshot carries the offset it
// has taken, and no clicks.dlq topic is made.
func TestIcebergDeadLetters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newIcebergFixture(ctx, t, 1, kgo.DefaultProduceTopic("clicks"))
	cl, adm, cfg := f.client, f.adm, f.cfg
	bad := map[int64][]byte{1: []byte(`{"type":`), 3: nil, 4: []byte(`{"event_id":"e4"}`)}
	for o := range int64(6) {
		r := click(o, 0)
		if v, ok := bad[o]; ok {
			r.Value = v
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	f.landUntil(ctx, t, f.startWorker(ctx, t), 6)

	tbl, _ := readTable(t, cfg)
	if got := scanEventIDs(t, tbl); strings.Join(got, " ") != "e0 e2 e5" {
		t.Errorf("the clicks table holds %v, want e0 e2 e5", got)
	}
	dlq, progress := readDeadLetters(t, cfg)
	if progress.Offsets[0] != 6 {
		t.Errorf("the dead-letter table's offsets are %v; want partition 0 at 6", progress.Offsets)
	}
	rows := scanDeadLetters(t, dlq)
	want := []string{
		`clicks/0@1 raw="{\"type\":" reason=click: malformed JSON: unexpected end of input at byte 8`,
		`clicks/0@3 raw=null reason=empty record value`,
		`clicks/0@4 raw="{\"event_id\":\"e4\"}" reason=click: field "type": missing required field: absent or null`,
	}
	if !slices.Equal(rows, want) {
		t.Errorf("dead-letter rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("clicks.dlq") {
		t.Error("format iceberg made the clicks.dlq topic; its dead letters go to the table only")
	}
}

// TestDeadLettersCommittedOnce commits the dead letters of a window, then
// of the same records cut differently (a window landed again after a crash
// between the dead-letter table's commit and the topic table's): the rows
// the table has are skipped, each dead letter lands once, and the table's
// offset follows the windows.
func TestDeadLettersCommittedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Group: "g", Topics: []string{"clicks"}, Format: FormatIceberg, Iceberg: TableConfig{Warehouse: root}}
	cat, tables, err := openTables(ctx, cfg, st, schemas.Click, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	c := &tableCommitter{catalog: cat, group: "g", store: tableStore{Store: st, namespace: "millrace"}, tables: tables}
	tp := topicPartition{"clicks", 0}
	letter := func(o int64) iceberg.DeadLetterRow {
		return iceberg.DeadLetterRow{Topic: "clicks", Offset: o, LastOffset: -1, Raw: fmt.Appendf(nil, "bad %d", o),
			Reason: "bad", Time: base.Add(time.Duration(o) * time.Second)}
	}
	window := func(start, next int64, offsets ...int64) windowCommit {
		wc := windowCommit{tp: tp, start: start, next: next}
		for _, o := range offsets {
			wc.deadLetterRows = append(wc.deadLetterRows, letter(o))
		}
		return wc
	}
	steps := []struct {
		wc         windowCommit
		wantOffset int64
	}{
		{window(0, 10, 2, 5, 8), 10},
		{window(0, 6, 2, 5), 10},             // landed again, cut earlier: nothing new
		{window(0, 14, 2, 5, 8, 11, 13), 14}, // cut later: 11 and 13 are new
		{window(14, 20), 14},                 // no dead letters: not committed
		{window(20, 22, 21), 22},             // the table's offset lags (no dead letters in [14, 20))
	}
	for i, s := range steps {
		if len(s.wc.deadLetterRows) > 0 {
			if err := c.commitDeadLetters(ctx, s.wc); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		dlq, err := cat.DeadLetterTable(ctx, "clicks")
		if err != nil {
			t.Fatal(err)
		}
		p, err := iceberg.ReadProgress(dlq, "g", "clicks")
		if err != nil {
			t.Fatal(err)
		}
		if p.Offsets[0] != s.wantOffset {
			t.Errorf("step %d: the dead-letter table's offset is %d, want %d", i, p.Offsets[0], s.wantOffset)
		}
	}
	dlq, err := cat.DeadLetterTable(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	got := scanDeadLetters(t, dlq)
	var want []string
	for _, o := range []int64{2, 5, 8, 11, 13, 21} {
		want = append(want, fmt.Sprintf(`clicks/0@%d raw="bad %d" reason=bad`, o, o))
	}
	if !slices.Equal(got, want) {
		t.Errorf("dead-letter rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// readDeadLetters opens cfg's catalog and returns the clicks~dlq table and
// the group's offsets in it.
func readDeadLetters(t *testing.T, cfg Config) (*table.Table, iceberg.Progress) {
	t.Helper()
	return readNamedTable(t, cfg, "clicks"+iceberg.DeadLetterSuffix)
}

// scanDeadLetters reads a dead-letter table with iceberg-go's scan, one
// line per row, sorted by offset.
func scanDeadLetters(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	_, batches, err := tbl.Scan().ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byOffset := map[int64]string{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		for i := range int(rec.NumRows()) {
			raw := "null"
			if c := rec.Column(col(iceberg.DeadLetterRaw)); !c.IsNull(i) {
				raw = fmt.Sprintf("%q", c.GetOneForMarshal(i))
			}
			offset := rec.Column(col(iceberg.DeadLetterOffset)).GetOneForMarshal(i).(int64)
			if _, dup := byOffset[offset]; dup {
				t.Errorf("offset %d is in the dead-letter table twice", offset)
			}
			byOffset[offset] = fmt.Sprintf("%s/%s@%d raw=%s reason=%s",
				rec.Column(col(iceberg.DeadLetterTopic)).ValueStr(i), rec.Column(col(iceberg.DeadLetterPartition)).ValueStr(i),
				offset, raw, rec.Column(col(iceberg.DeadLetterReason)).ValueStr(i))
		}
		rec.Release()
	}
	var out []string
	for _, o := range slices.Sorted(maps.Keys(byOffset)) {
		out = append(out, byOffset[o])
	}
	return out
}

// rowsCommitter records the dead-letter rows of each window it commits.
type rowsCommitter struct {
	windows []string
}

func (c *rowsCommitter) commit(_ context.Context, wc windowCommit) error {
	var rows []string
	for _, r := range wc.deadLetterRows {
		rows = append(rows, fmt.Sprintf("%s/%d@%d-%d raw=%q reason=%q time=%s", r.Topic, r.Partition, r.Offset, r.LastOffset,
			r.Raw, r.Reason, r.Time.Format(time.RFC3339)))
	}
	c.windows = append(c.windows, fmt.Sprintf("[%d,%d) %s", wc.start, wc.next, strings.Join(rows, "; ")))
	return nil
}

// With format iceberg, an undecodable batch and a record the schema
// refuses become dead-letter rows of the window that holds them, handed to
// the committer with it (the batch with its last offset, its codec's
// error and no value); nothing is produced to a dead-letter topic.
func TestIcebergDeadLetterRowsOfAWindow(t *testing.T) {
	root := t.TempDir()
	w, _, _ := testWorker(t, root, func(c *Config) {
		c.RollRows = 3
		c.Format, c.Iceberg = FormatIceberg, TableConfig{Warehouse: root}
	})
	c := &rowsCommitter{}
	w.commit, w.dlq = c, nil // a send to a topic would panic
	withBatches(w, &fakeBatches{desc: batchDescription{bytes: 80, compression: "zstd", records: 3, firstTimestamp: base,
		err: "zstd: invalid input: magic number mismatch"}})
	log := clickLog(9, 2, 5)
	log[4].rec.Value = []byte(`{"type":`) // offset 6
	if err := feedLog(w, log, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`[0,6) clicks/0@2-4 raw="" reason="undecodable batch: zstd: invalid input: magic number mismatch" time=2024-05-01T10:00:00Z`,
		`[6,9) clicks/0@6--1 raw="{\"type\":" reason="click: malformed JSON: unexpected end of input at byte 8" time=2024-05-01T10:00:06Z`,
	}
	if !slices.Equal(c.windows, want) {
		t.Errorf("windows:\n%s\nwant:\n%s", strings.Join(c.windows, "\n"), strings.Join(want, "\n"))
	}
}
