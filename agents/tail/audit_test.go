package tail

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
	"millrace/internal/waitfor"
)

func TestAuditCountsOnlyLinesBeforeTheCheckpoint(t *testing.T) {
	h := &harvester{}
	var seqs []uint64
	for i, hour := range []int32{7, 7, 8, 8} {
		seqs = append(seqs, h.track(int64(i*10), int64(i*10+10), hour))
	}
	h.settle(seqs[1])
	h.settle(seqs[2]) // acknowledged, but after the checkpoint: not counted yet
	if len(h.counts) != 0 {
		t.Fatalf("counted lines after the checkpoint: %+v", h.counts)
	}
	h.settle(seqs[0])
	if want := []hourCount{{7, 2}, {8, 1}}; !equalCounts(h.counts, want) {
		t.Fatalf("counts %+v, want %+v", h.counts, want)
	}
	h.skip(seqs[3]) // refused for good: passed, not counted
	if h.checkpoint() != 40 || !equalCounts(h.counts, []hourCount{{7, 2}, {8, 1}}) {
		t.Fatalf("after a refused line: checkpoint %d counts %+v", h.checkpoint(), h.counts)
	}
}

func equalCounts(a, b []hourCount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// auditSink is an audit producer that acknowledges every record.
type auditSink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (s *auditSink) Produce(_ context.Context, r *kgo.Record, ack ship.AckFunc) {
	rec, err := audit.ParseRecord(r.Value)
	s.mu.Lock()
	if err == nil {
		s.recs = append(s.recs, rec)
	}
	s.mu.Unlock()
	ack(r, err)
}

func (s *auditSink) Flush(context.Context) error { return nil }

// latest is the latest published total per source.
func (s *auditSink) latest() map[string]audit.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]audit.Record{}
	for _, r := range s.recs {
		m[r.Source] = r
	}
	return m
}

func persistedTotal(t *testing.T, dataDir string) int64 {
	t.Helper()
	counts, err := ReadAuditCounts(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c.Accepted
	}
	return n
}

// TestAuditCountsSurviveACrash acknowledges some lines, some of them beyond
// the checkpoint, kills the tailer, restarts it and acknowledges what it
// sends again: the published total is the number of distinct lines.
func TestAuditCountsSurviveACrash(t *testing.T) {
	dir, dataDir := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "x", 0, 10) // 14 bytes a line
	cfg := testConfig(dir, dataDir)
	sink := &auditSink{}

	run := func() (*Tailer, *heldProducer, *audit.Counter, context.CancelFunc) {
		c, err := audit.NewCounter(audit.Config{}, audit.RoleTail, "tail-1", true, sink, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &heldProducer{}
		tl, err := New(cfg, p, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		tl.SetAudit(c)
		ctx, cancel := context.WithCancel(context.Background())
		if err := tl.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return tl, p, c, cancel
	}

	tl, p, c, cancel := run()
	waitfor.Until(t, 20*time.Second, "10 lines sent", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.recs) == 10 })
	for _, i := range []int{0, 1, 2, 3, 6, 7} {
		p.ack(i, nil)
	}
	waitfor.Until(t, 20*time.Second, "the checkpoint at line 4 with its counts", func() bool {
		return registryOffset(t, dataDir, path) == 4*14 && persistedTotal(t, dataDir) == 4
	})
	// The counts reach the counter right after the registry write the
	// condition above saw.
	source := audit.LogSource("web-1", path)
	waitfor.Until(t, 20*time.Second, "the 4 lines before the checkpoint published", func() bool {
		c.Publish(context.Background())
		got := sink.latest()[source]
		return got.Accepted == 4 && got.Distinct && got.Topic == topic
	})
	// Crash: no final checkpoint; lines 6 and 7 were acknowledged beyond it.
	cancel()
	if err := tl.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	tl, p, c, cancel = run()
	defer cancel()
	waitfor.Until(t, 20*time.Second, "lines 4-9 sent again", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.recs) == 6 })
	for i := range 6 {
		p.ack(i, nil)
	}
	waitfor.Until(t, 20*time.Second, "every line before the checkpoint", func() bool { return persistedTotal(t, dataDir) == 10 })
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := tl.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.latest()[source]; got.Accepted != 10 {
		t.Fatalf("published after the restart: %d, want the 10 distinct lines", got.Accepted)
	}
}
