package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// gatedCommitter passes every commit to next but the one ending at failAt,
// which waits for release and then fails, as a catalog that goes away
// mid-commit does: before the commit reached it, or (landed) after it
// took the commit and before its answer came back.
type gatedCommitter struct {
	next    committer
	failAt  int64
	landed  bool
	entered chan struct{} // closed when the gated commit has begun
	release chan struct{}
}

var errCatalogGone = errors.New("the catalog is unreachable")

func (g *gatedCommitter) commit(ctx context.Context, wc windowCommit) error {
	if wc.next != g.failAt {
		return g.next.commit(ctx, wc)
	}
	close(g.entered)
	<-g.release
	if g.landed {
		if err := g.next.commit(ctx, wc); err != nil {
			return err
		}
	}
	return errCatalogGone
}

// pipelineWorker is a worker of Format iceberg over a real SQLite catalog
// in root, with the commit pipeline on, fake Kafka sides, rolls of two
// rows, and its table committer (whose group commits go to group); wrap,
// when given, wraps the committer.
func pipelineWorker(t *testing.T, root string, wrap func(committer) committer) (*Worker, *tableCommitter, *fakeCommitter) {
	t.Helper()
	w, _, _ := testWorker(t, root, func(c *Config) {
		c.Format, c.Iceberg, c.RollRows = FormatIceberg, TableConfig{Warehouse: root}, 2
	})
	cat, tables, err := openTables(t.Context(), w.cfg, w.store, w.schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	group := &fakeCommitter{}
	tc := &tableCommitter{catalog: cat, group: w.cfg.Group, store: w.store, next: group,
		logger: slog.New(slog.DiscardHandler), tables: tables, from: map[topicPartition]int64{}}
	w.commit, w.tables, w.pipeline = tc, cat, &commitPipeline{}
	if wrap != nil {
		w.commit = wrap(tc)
	}
	return w, tc, group
}

// TestPipelineFailedCommitDiscardsTheNextWindow: the table commit of the
// window [2, 4) runs while the worker writes the next window's first row,
// and fails. The next window is discarded, never published; the worker
// stops. A worker started again from the table's offset lands the rest:
// every record is in the table once, whether the failed commit reached the
// catalog or not (doc.go, "The commit off the landing path": a failed
// commit fails the windows written after it; the table is the source of
// truth for where to start).
func TestPipelineFailedCommitDiscardsTheNextWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		landed     bool  // the catalog took the failed commit
		tableAfter int64 // the table's offset after the failure
	}{
		{"before the catalog", false, 2},
		{"after the catalog", true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			var recs []*kgo.Record
			var want []string
			for i := range int64(9) {
				recs = append(recs, click(i, 0))
				want = append(want, fmt.Sprintf("e%d", i))
			}
			slices.Sort(want)
			gate := &gatedCommitter{failAt: 4, landed: tc.landed, entered: make(chan struct{}), release: make(chan struct{})}
			w, _, group := pipelineWorker(t, root, func(c committer) committer { gate.next = c; return gate })

			// [0, 2) and [2, 4) land; the commit of [2, 4) hangs.
			if err := feed(w, recs[:4], 0); err != nil {
				t.Fatal(err)
			}
			<-gate.entered
			// The next window's first row is written while it hangs: the
			// landing path does not wait for the commit.
			if err := feed(w, recs[:5], 4); err != nil {
				t.Fatalf("writing the next window while a commit runs: %v", err)
			}
			close(gate.release)
			// The next window ends: it finds the commit failed, and is
			// discarded instead of published.
			err := feed(w, recs[:6], 5)
			if !errors.Is(err, errCatalogGone) {
				t.Fatalf("landing after a failed commit: %v, want the commit's error", err)
			}
			w.fail(context.Background(), err)
			objs, lerr := w.store.List(t.Context(), "clicks/")
			if lerr != nil {
				t.Fatal(lerr)
			}
			for _, o := range objs {
				if strings.Contains(o.Name, fmt.Sprintf("-%020d-", 4)) {
					t.Errorf("%s was published after the commit before it failed", o.Name)
				}
			}
			wantGroup := "clicks/0@2"
			if tc.landed {
				wantGroup += " clicks/0@4"
			}
			if got := strings.Join(group.log, " "); got != wantGroup {
				t.Errorf("group commits %q, want %q", got, wantGroup)
			}
			if _, progress := readTable(t, w.cfg); progress.Offsets[0] != tc.tableAfter {
				t.Fatalf("the table's offset after the failure is %v, want %d", progress.Offsets, tc.tableAfter)
			}

			// The next start reads its offset from the table and lands the rest.
			again, tc2, _ := pipelineWorker(t, root, nil)
			starts, err := tc2.startOffsets(t.Context(), map[string]map[int32]kgo.Offset{"clicks": {0: kgo.NewOffset()}})
			if err != nil {
				t.Fatal(err)
			}
			from := starts["clicks"][0].EpochOffset().Offset
			if from != tc.tableAfter {
				t.Fatalf("the next start is at %d, want the table's %d", from, tc.tableAfter)
			}
			if err := feed(again, recs, from); err != nil {
				t.Fatal(err)
			}
			if err := flushAll(again); err != nil {
				t.Fatal(err)
			}
			tbl, progress := readTable(t, again.cfg)
			if got := scanEventIDs(t, tbl); !slices.Equal(got, want) {
				t.Errorf("the table holds %v, want %v once each", got, want)
			}
			if progress.Offsets[0] != int64(len(recs)) {
				t.Errorf("the table's offsets %v, want partition 0 at %d", progress.Offsets, len(recs))
			}
		})
	}
}

// TestPipelineCommitsInOrder: with the pipeline, every window is committed
// after the one before it, one at a time, and Shutdown's path (flushAll)
// waits for the last one.
func TestPipelineCommitsInOrder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var recs []*kgo.Record
	for i := range int64(7) {
		recs = append(recs, click(i, int(i%2)))
	}
	w, _, group := pipelineWorker(t, root, nil)
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if w.pipeline.inflight != nil {
		t.Error("a commit is still in flight after the shutdown's landings")
	}
	if got := strings.Join(group.log, " "); got != "clicks/0@2 clicks/0@4 clicks/0@6 clicks/0@7" {
		t.Errorf("group commits %q, want every window in order", got)
	}
	tbl, progress := readTable(t, w.cfg)
	if got := scanEventIDs(t, tbl); len(got) != len(recs) {
		t.Errorf("the table holds %v, want %d rows", got, len(recs))
	}
	if progress.Offsets[0] != 7 {
		t.Errorf("the table's offsets %v, want 7", progress.Offsets)
	}
}
