package lake

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
	"millrace/store"
)

// blockingHistory has a commit at offset 2 whose replay hands out records
// 0 and 1 only once release is closed, after saying it started.
type blockingHistory struct {
	started, release chan struct{}
}

func (h *blockingHistory) committed(context.Context, topicPartition) (int64, time.Time, bool, error) {
	return 2, base.Add(time.Hour), true, nil
}

func (h *blockingHistory) replay(_ context.Context, _ topicPartition, _ time.Time, before int64, fn func(*kgo.Record)) error {
	close(h.started)
	<-h.release
	for i := range before {
		fn(uuidClick(i, int(i)+1))
	}
	return nil
}

// TestRebuildHoldsNoLock: while a newly assigned partition's dedup state is
// replayed, the worker's locks are free (Err, Shutdown and the rebalance
// callbacks do not wait for a replay of up to two minutes), and the records
// are decided with the rebuilt state once it is done.
func TestRebuildHoldsNoLock(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, nil)
	h := &blockingHistory{started: make(chan struct{}), release: make(chan struct{})}
	w.history = h
	// Offsets 2..3 repeat the replayed ids of offsets 0 and 1; 4 is new.
	recs := []*kgo.Record{uuidClick(2, 1), uuidClick(3, 2), uuidClick(4, 3)}
	fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "clicks",
		Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}}}
	done := make(chan error, 1)
	go func() { done <- w.handle(context.Background(), fetches) }()
	<-h.started
	if !w.landing.TryLock() {
		t.Fatal("the landing lock is held during the dedup replay")
	}
	w.landing.Unlock()
	if !w.mu.TryLock() {
		t.Fatal("the state lock is held during the dedup replay")
	}
	w.mu.Unlock()
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(landed(t, root))
	want := fmt.Sprint(map[string][]string{
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000004-00000000000000000004.parquet": {uuidOf(3)}})
	if got != want {
		t.Errorf("landed %s, want %s (the replayed ids dropped)", got, want)
	}
	if fmt.Sprint(c.log) != "[clicks/0@5]" {
		t.Errorf("commits %v", c.log)
	}
}

// blockingCommitter says when a commit started and finishes it once
// release is closed.
type blockingCommitter struct {
	started, release chan struct{}
}

func (c *blockingCommitter) commit(context.Context, windowCommit) error {
	close(c.started)
	<-c.release
	return nil
}

// TestErrDoesNotWaitForALanding: Err answers while a window's landing (its
// publish and commit, held under the landing lock) is in progress.
func TestErrDoesNotWaitForALanding(t *testing.T) {
	w, _, _ := testWorker(t, t.TempDir(), nil)
	c := &blockingCommitter{started: make(chan struct{}), release: make(chan struct{})}
	w.commit = c
	if err := feed(w, []*kgo.Record{click(0, 0)}, 0); err != nil {
		t.Fatal(err)
	}
	landed := make(chan error, 1)
	go func() { landed <- flushAll(w) }()
	<-c.started
	answered := make(chan error, 1)
	go func() { answered <- w.Err() }()
	waitfor.Until(t, 30*time.Second, "Err to answer during a landing", func() bool { return len(answered) == 1 })
	if err := <-answered; err != nil {
		t.Errorf("Err = %v", err)
	}
	close(c.release)
	if err := <-landed; err != nil {
		t.Fatal(err)
	}
}

// blockingStore is a store whose objects say when a publish started and
// finish it once release is closed.
type blockingStore struct {
	store.Store
	started, release chan struct{}
}

func (s *blockingStore) Create(ctx context.Context, name string) (store.Object, error) {
	obj, err := s.Store.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &blockingObject{Object: obj, store: s}, nil
}

type blockingObject struct {
	store.Object
	store *blockingStore
}

func (o *blockingObject) PublishAs(ctx context.Context, name string) error {
	close(o.store.started)
	<-o.store.release
	return o.Object.PublishAs(ctx, name)
}

// TestStateLockFreeDuringALanding: while a landing waits in the store, the
// worker's state lock is free: Err answers, and a rebalance callback's
// bookkeeping (the new partition recorded as assigned to this member)
// completes, both before the landing's publish returns. Only landings wait
// for each other.
func TestStateLockFreeDuringALanding(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, nil)
	st := &blockingStore{Store: w.store, started: make(chan struct{}), release: make(chan struct{})}
	w.store = st
	if err := feed(w, []*kgo.Record{click(0, 0)}, 0); err != nil {
		t.Fatal(err)
	}
	landing := make(chan error, 1)
	go func() { landing <- flushAll(w) }()
	<-st.started

	assigned := make(chan struct{})
	go func() {
		w.onAssigned(context.Background(), nil, map[string][]int32{"clicks": {1}})
		close(assigned)
	}()
	answered := make(chan error, 1)
	go func() { answered <- w.Err() }()
	waitfor.Until(t, 30*time.Second, "Err and the assignment bookkeeping to finish during a landing", func() bool {
		select {
		case <-assigned:
			return len(answered) == 1
		default:
			return false
		}
	})
	if err := <-answered; err != nil {
		t.Errorf("Err = %v", err)
	}
	if w.partition(topicPartition{"clicks", 1}) == nil {
		t.Error("the assigned partition was not recorded")
	}
	if len(landing) != 0 || len(c.log) != 0 {
		t.Fatal("the landing finished before its publish was released")
	}
	close(st.release)
	if err := <-landing; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.log) != "[clicks/0@1]" {
		t.Errorf("commits %v", c.log)
	}
	if n := len(landed(t, root)); n != 1 {
		t.Errorf("%d files landed, want 1", n)
	}
}
