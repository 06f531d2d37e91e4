package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
	"millrace/sinks/iceberg"
	"millrace/store"
)

// TestIcebergTableCommits lands clicks in two rolls into a table of a real
// SQLite catalog, reads them back with iceberg-go's scan, exactly once,
// with the snapshot's offsets equal to the group's. A second worker, whose
// group offset was moved back (as a crash between the table's commit and
// the group's leaves it), starts from the table's offset: nothing is landed
// twice.
func TestIcebergTableCommits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newIcebergFixture(ctx, t, 1)
	addr, adm, cfg := f.addr, f.adm, f.cfg
	groupAt := func() int64 { return f.groupAt(ctx) }

	// Three records, two rolls: [0, 1] by RollRows, [2] when idle.
	produceClicks(ctx, t, addr, 0, 1, 2)
	f.landUntil(ctx, t, f.startWorker(ctx, t), 3)
	tbl, progress := readTable(t, cfg)
	if got := scanEventIDs(t, tbl); strings.Join(got, " ") != "e0 e1 e2" {
		t.Errorf("the table holds %v, want e0 e1 e2", got)
	}
	if progress.Offsets[0] != 3 || groupAt() != 3 {
		t.Errorf("the snapshot's offsets are %v, the group's %d; want both at 3", progress.Offsets, groupAt())
	}
	if n := len(tbl.Metadata().Snapshots()); n < 2 {
		t.Errorf("%d snapshots, want one per roll (at least 2)", n)
	}

	// The group falls behind the table; the table says where to start.
	if _, err := adm.CommitOffsets(ctx, "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "clicks", Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	produceClicks(ctx, t, addr, 3, 4)
	f.landUntil(ctx, t, f.startWorker(ctx, t), 5)
	tbl, progress = readTable(t, cfg)
	if got := scanEventIDs(t, tbl); strings.Join(got, " ") != "e0 e1 e2 e3 e4" {
		t.Errorf("the table holds %v, want e0 … e4 once each", got)
	}
	if progress.Offsets[0] != 5 || groupAt() != 5 {
		t.Errorf("the snapshot's offsets are %v, the group's %d; want both at 5", progress.Offsets, groupAt())
	}
	if _, ok := progress.Watermarks[0]; !ok {
		t.Errorf("no watermark of partition 0 in the snapshot: %v", progress.Watermarks)
	}
}

// icebergFixture is what the tests of a worker landing into a table start
// from: an in-process broker with a topic clicks, a client of it, a file
// store, and a worker config landing clicks into an Iceberg table (a
// SQLite catalog in the store's root) in rolls of two rows. A test may
// change st and cfg (another store, other table settings) before it
// starts a worker.
type icebergFixture struct {
	addr   string
	client *kgo.Client
	adm    *kadm.Client
	st     store.Store
	cfg    Config
}

// newIcebergFixture starts the fixture with partitions partitions of
// clicks; opts are the client's besides its seed.
func newIcebergFixture(ctx context.Context, t *testing.T, partitions int32, opts ...kgo.Opt) icebergFixture {
	t.Helper()
	addr, _ := startBroker(t, t.TempDir())
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return icebergFixture{addr: addr, client: cl, adm: adm, st: st,
		cfg: Config{Brokers: []string{addr}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
			Format: FormatIceberg, Iceberg: TableConfig{Warehouse: root}, RollRows: 2,
			IdleTimeout: 100 * time.Millisecond, AuditTopic: "off"}}
}

// startWorker starts a worker of f.cfg on f.st; the caller shuts it down.
func (f icebergFixture) startWorker(ctx context.Context, t *testing.T) *Worker {
	t.Helper()
	w, err := New(f.cfg, f.st, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return w
}

// groupAt is the group's committed offset of clicks partition 0, -1 before
// it has one.
func (f icebergFixture) groupAt(ctx context.Context) int64 {
	offsets, err := f.adm.FetchOffsets(ctx, f.cfg.Group)
	if o, ok := offsets.Lookup("clicks", 0); err == nil && ok {
		return o.At
	}
	return -1
}

// landUntil waits for the group offset of clicks partition 0 to reach
// offset, failing if w stops first, then shuts w down.
func (f icebergFixture) landUntil(ctx context.Context, t *testing.T, w *Worker, offset int64) {
	t.Helper()
	waitfor.Until(t, time.Minute, fmt.Sprintf("the group offset at %d", offset), func() bool {
		select {
		case <-w.Done():
			t.Fatalf("the worker stopped: %v", w.Err())
		default:
		}
		return f.groupAt(ctx) == offset
	})
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// readTable opens cfg's catalog and returns the clicks table and the
// group's progress in it.
func readTable(t *testing.T, cfg Config) (*table.Table, iceberg.Progress) {
	t.Helper()
	return readNamedTable(t, cfg, "clicks")
}

// readNamedTable opens cfg's catalog and returns its table name and the
// group's progress in it on the clicks topic.
func readNamedTable(t *testing.T, cfg Config, name string) (*table.Table, iceberg.Progress) {
	t.Helper()
	cc, err := cfg.Iceberg.catalogConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := iceberg.Open(t.Context(), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Catalog().LoadTable(t.Context(), cat.Identifier(name))
	if err != nil {
		t.Fatal(err)
	}
	progress, err := iceberg.ReadProgress(tbl, cfg.Group, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	return tbl, progress
}

// scanEventIDs reads the event_id of every row of tbl with iceberg-go's scan, sorted.
func scanEventIDs(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	return readEventIDs(t, tbl.Scan(table.WithSelectedFields("event_id")))
}

// readEventIDs reads the event_id of every row scan reads, sorted.
func readEventIDs(t *testing.T, scan *table.Scan) []string {
	t.Helper()
	_, batches, err := scan.ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(rec.Schema().FieldIndices("event_id")[0]).(*array.String)
		for i := range col.Len() {
			ids = append(ids, col.Value(i))
		}
		rec.Release()
	}
	slices.Sort(ids)
	return ids
}

// TestIcebergConcurrentWorkers: two workers of one group land the two
// partitions of a topic into one table in rolls of two rows, their commits
// interleaving; a commit that loses the compare-and-swap to the other
// worker's is rebased, not lost. Every record is in the table once, and
// the snapshot's offsets are the group's.
func TestIcebergConcurrentWorkers(t *testing.T) {
	t.Parallel()
	const perPartition = 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newIcebergFixture(ctx, t, 2, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cl, adm, cfg := f.client, f.adm, f.cfg
	var err error
	var workers []*Worker
	for range 2 {
		w := f.startWorker(ctx, t)
		defer w.Shutdown(context.Background())
		workers = append(workers, w)
	}
	// Both members hold a partition before the records come, so their
	// rolls interleave.
	waitfor.Until(t, time.Minute, "a partition for each worker", func() bool {
		for _, w := range workers {
			w.mu.Lock()
			n := len(w.parts)
			w.mu.Unlock()
			if n != 1 {
				return false
			}
		}
		return true
	})
	var want []string
	for i := range int64(2 * perPartition) {
		r := click(i, 0)
		r.Partition = int32(i % 2)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("e%d", i))
	}
	slices.Sort(want)
	var group kadm.OffsetResponses
	waitfor.Until(t, time.Minute, "both partitions landed", func() bool {
		for _, w := range workers {
			select {
			case <-w.Done():
				t.Fatalf("a worker stopped: %v", w.Err())
			default:
			}
		}
		group, err = adm.FetchOffsets(ctx, "g")
		p0, ok0 := group.Lookup("clicks", 0)
		p1, ok1 := group.Lookup("clicks", 1)
		return err == nil && ok0 && ok1 && p0.At == perPartition && p1.At == perPartition
	})
	tbl, progress := readTable(t, cfg)
	if got := scanEventIDs(t, tbl); !slices.Equal(got, want) {
		t.Errorf("the table holds %v, want %v", got, want)
	}
	for part := range int32(2) {
		if o, _ := group.Lookup("clicks", part); progress.Offsets[part] != o.At {
			t.Errorf("partition %d: the snapshot's offset %d, the group's %d", part, progress.Offsets[part], o.At)
		}
	}
}

// TestIcebergZombieCommitRefused: a worker whose partition another owner
// committed past where its window starts gets ErrZombie from its commit
// (the worker then stops), the table keeps the other owner's offsets, and
// the group offset is not committed for it. A conflict with a commit of
// another partition is rebased and lands.
func TestIcebergZombieCommitRefused(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := Config{Group: "g", Topics: []string{"clicks"}, Schema: "click", Format: FormatIceberg,
		Iceberg: TableConfig{Warehouse: root}}
	s, err := cfg.eventSchema()
	if err != nil {
		t.Fatal(err)
	}
	cat, tables, err := openTables(t.Context(), cfg, nil, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	group := &fakeCommitter{}
	c := &tableCommitter{catalog: cat, group: "g", next: group, logger: slog.New(slog.DiscardHandler),
		tables: tables, from: map[topicPartition]int64{}}
	p0, p1 := topicPartition{"clicks", 0}, topicPartition{"clicks", 1}
	if err := c.commit(t.Context(), windowCommit{tp: p0, start: 0, next: 3}); err != nil {
		t.Fatal(err)
	}

	// Another owner of partition 0 lands [3, 5), and another worker's
	// partition 1 [0, 4); this committer's table is now stale.
	other := &tableCommitter{catalog: cat, group: "g", next: &fakeCommitter{}, logger: slog.New(slog.DiscardHandler),
		tables: map[string]*table.Table{"clicks": tables["clicks"]}, from: map[topicPartition]int64{}}
	if _, err := other.startOffsets(t.Context(), map[string]map[int32]kgo.Offset{"clicks": {0: kgo.NewOffset()}}); err != nil {
		t.Fatal(err)
	}
	for _, wc := range []windowCommit{{tp: p0, start: 3, next: 5}, {tp: p1, start: 0, next: 4}} {
		if err := other.commit(t.Context(), wc); err != nil {
			t.Fatal(err)
		}
	}

	err = c.commit(t.Context(), windowCommit{tp: p0, start: 3, next: 6})
	if !errors.Is(err, iceberg.ErrZombie) {
		t.Fatalf("the zombie's commit: %v, want ErrZombie", err)
	}
	if got := group.log; len(got) != 1 || got[0] != "clicks/0@3" {
		t.Errorf("group commits %v, want only clicks/0@3", got)
	}
	// The other worker lands partition 1 again, so this committer's table
	// is stale once more, but only another worker's partition moved: its
	// window of partition 2 conflicts, is rebased and lands.
	if err := other.commit(t.Context(), windowCommit{tp: p1, start: 4, next: 6}); err != nil {
		t.Fatal(err)
	}
	c.from[topicPartition{"clicks", 2}] = 0
	if err := c.commit(t.Context(), windowCommit{tp: topicPartition{"clicks", 2}, start: 0, next: 7}); err != nil {
		t.Fatalf("a commit after another partition's: %v", err)
	}
	_, progress := readTable(t, cfg)
	if want := map[int32]int64{0: 5, 1: 6, 2: 7}; !maps.Equal(progress.Offsets, want) {
		t.Errorf("the table's offsets %v, want %v", progress.Offsets, want)
	}
}
