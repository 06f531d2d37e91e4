package kafkalog_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker"
	"millrace/internal/leaktest"
	"millrace/internal/waitfor"
	"millrace/schemas/registry"
	. "millrace/schemas/registry/kafkalog"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// startBroker runs a broker (embedded coordination) over dir and returns
// its address and a function that stops it; the test's cleanup stops it
// too.
func startBroker(t *testing.T, dir string) (string, func()) {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir, cfg.Kafka.Listener = dir, "127.0.0.1:0"
	b, err := broker.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("broker: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return b.Addr().String(), stop
}

func openLog(t *testing.T, addr string, onFenced func()) *Log {
	t.Helper()
	l, err := New(Config{Opts: []kgo.Opt{kgo.SeedBrokers(addr)}, OnFenced: onFenced})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func rec(key, value string) registry.Record {
	return registry.Record{Key: []byte(key), Value: []byte(value)}
}

// readAll reads from 0 until it has passed through (the last offset the
// test appended, -1 for none) and End, as a registry catching up does, and
// returns the records that are not markers. A commit's markers are written
// just after Append returns, so through, not End, is what a writer waits
// for.
func readAll(t *testing.T, ctx context.Context, l *Log, through int64) []registry.Record {
	t.Helper()
	end, err := l.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []registry.Record
	for next := int64(0); next < end || next <= through; {
		recs, err := l.Read(ctx, next)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		for _, r := range recs {
			if r.Offset < next {
				t.Fatalf("Read(%d) returned offset %d", next, r.Offset)
			}
			next = r.Offset + 1
			if !bytes.Equal(r.Key, NoopKey) {
				out = append(out, r)
			}
		}
	}
	return out
}

func keys(recs []registry.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Key)+"="+string(r.Value))
	}
	return out
}

func TestAppendReadEnd(t *testing.T) {
	t.Parallel()
	addr, _ := startBroker(t, t.TempDir())
	ctx := testContext(t)
	l := openLog(t, addr, nil)
	if _, err := l.Append(ctx, []registry.Record{rec("a", "1")}); !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("Append before Claim: %v, want ErrFenced", err)
	}
	if end, err := l.End(ctx); err != nil || end != 0 {
		t.Fatalf("End of a new topic = %d, %v; want 0", end, err)
	}
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := l.Append(ctx, []registry.Record{rec("a", "1"), rec("b", "2")})
	if err != nil {
		t.Fatal(err)
	}
	if last != 1 {
		t.Fatalf("Append returned offset %d, want 1", last)
	}
	// Two records and the commit marker, once the marker is written.
	waitfor.Until(t, 10*time.Second, "End past the commit marker", func() bool {
		end, err := l.End(ctx)
		return err == nil && end == 3
	})
	last, err = l.Append(ctx, []registry.Record{{Key: []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	got := keys(readAll(t, ctx, l, last))
	want := []string{"a=1", "b=2", "a="}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("read back %q, want %q", got, want)
	}
	// Past the end (the last write and its marker), Read waits for a
	// record until its context ends.
	end := last + 2
	waitfor.Until(t, 10*time.Second, "End past the last commit marker", func() bool {
		e, err := l.End(ctx)
		return err == nil && e == end
	})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if recs, err := l.Read(short, end); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read(%d) past the end = %v, %v; want the context's deadline", end, recs, err)
	}
	// A marker comes back as a NOOP record at its own offset.
	recs, err := l.Read(ctx, 2)
	if err != nil || len(recs) == 0 || recs[0].Offset != 2 || !bytes.Equal(recs[0].Key, NoopKey) || recs[0].Value != nil {
		t.Fatalf("Read(2) = %+v, %v; want the commit marker as a NOOP record", recs, err)
	}

	// The topic is made as the registry needs it.
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	configs, err := kadm.NewClient(admin).DescribeTopicConfigs(ctx, DefaultTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(DefaultTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "compact") {
			t.Fatalf("cleanup.policy = %v, want compact", c.Value)
		}
	}
}

// TestSecondWriterFencesFirst: a second registry's Claim fences the first,
// whose next Append fails with ErrFenced, tells its election, and never
// becomes visible; the second writes on.
func TestSecondWriterFencesFirst(t *testing.T) {
	t.Parallel()
	addr, _ := startBroker(t, t.TempDir())
	ctx := testContext(t)
	var fencedCalls atomic.Int32
	first := openLog(t, addr, func() { fencedCalls.Add(1) })
	second := openLog(t, addr, nil)
	if err := first.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Append(ctx, []registry.Record{rec("k", "first")}); err != nil {
		t.Fatal(err)
	}
	if err := second.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := first.Append(ctx, []registry.Record{rec("k", "fenced")})
	if !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("Append of the fenced writer: %v, want ErrFenced", err)
	}
	if fencedCalls.Load() != 1 {
		t.Fatalf("OnFenced called %d times, want 1", fencedCalls.Load())
	}
	// The claim is gone: no retry of a fenced producer.
	if _, err := first.Append(ctx, []registry.Record{rec("k", "again")}); !errors.Is(err, registry.ErrFenced) {
		t.Fatalf("Append after being fenced: %v, want ErrFenced", err)
	}
	last, err := second.Append(ctx, []registry.Record{rec("k", "second")})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Log{first, second} {
		got := keys(readAll(t, ctx, l, last))
		if len(got) != 2 || got[0] != "k=first" || got[1] != "k=second" {
			t.Fatalf("read back %q, want [k=first k=second]: the fenced record must never be visible", got)
		}
	}
}

// TestRestartReadsEverythingBack: what was appended is read back in order
// by a new log after the broker restarted on the same data.
func TestRestartReadsEverythingBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr, stop := startBroker(t, dir)
	ctx := testContext(t)
	l, err := New(Config{Opts: []kgo.Opt{kgo.SeedBrokers(addr)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, v := range []string{"1", "2", "3"} {
		if last, err = l.Append(ctx, []registry.Record{rec("k"+v, v)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	stop()

	addr, _ = startBroker(t, dir)
	again := openLog(t, addr, nil)
	got := keys(readAll(t, ctx, again, last))
	if len(got) != 3 || got[0] != "k1=1" || got[1] != "k2=2" || got[2] != "k3=3" {
		t.Fatalf("read back %q after a restart, want [k1=1 k2=2 k3=3]", got)
	}
}

// TestClaimAbortsTheOldWritersOpenTransaction: a write of the old primary
// that is produced but not committed when the new primary claims is
// aborted by the claim: its commit fails as fenced and its record is never
// visible.
func TestClaimAbortsTheOldWritersOpenTransaction(t *testing.T) {
	t.Parallel()
	addr, _ := startBroker(t, t.TempDir())
	ctx := testContext(t)
	newPrimary := openLog(t, addr, nil)
	// The old primary, stopped between produce and commit.
	old, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(DefaultTransactionalID),
		kgo.DefaultProduceTopic(DefaultTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := newPrimary.End(ctx); err != nil { // creates the topic
		t.Fatal(err)
	}
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("in flight")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := newPrimary.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the old primary's commit after the claim: %v, want it fenced", err)
	}
	last, err := newPrimary.Append(ctx, []registry.Record{rec("k", "new")})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(readAll(t, ctx, newPrimary, last)); len(got) != 1 || got[0] != "k=new" {
		t.Fatalf("read back %q, want [k=new]: the aborted write must never be visible", got)
	}
}
