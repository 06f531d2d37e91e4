// Package storetest is the conformance suite every store.Store backend passes.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"millrace/store"
)

// Config describes the backend under test.
type Config struct {
	// New returns an empty store; the suite closes it.
	New func(t *testing.T) store.Store
	// LargeObject is the size of the object used to check multi-part writes;
	// make it larger than the backend's part size.
	LargeObject int
	// SpoolsLocally is set for a backend that keeps an unpublished object on
	// the writer's machine (S3): the store holds nothing of it, so Cleanup
	// finds nothing to remove until a publish was interrupted.
	SpoolsLocally bool
}

// Run runs every conformance test against the backend.
func Run(t *testing.T, cfg Config) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, cfg Config)
	}{
		{"PublishMakesVisible", testPublishMakesVisible},
		{"LargeObject", testLargeObject},
		{"EmptyObject", testEmptyObject},
		{"PublishNeverReplaces", testPublishNeverReplaces},
		{"PublishAs", testPublishAs},
		{"RacingPublishes", testRacingPublishes},
		{"Abort", testAbort},
		{"ListPrefix", testListPrefix},
		{"Remove", testRemove},
		{"Cleanup", testCleanup},
		{"InvalidNames", testInvalidNames},
		{"ConcurrentObjects", testConcurrentObjects},
		{"Paced", testPaced},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := cfg.New(t)
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			tc.fn(t, s, cfg)
		})
	}
}

func read(t *testing.T, s store.Store, name string) []byte {
	t.Helper()
	r, err := s.Open(context.Background(), name)
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Size() != int64(len(data)) {
		t.Errorf("%s: Size() = %d, read %d bytes", name, r.Size(), len(data))
	}
	return data
}

func names(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

func testPublishMakesVisible(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	const name = "clicks/dt=2024-05-01/hr=10/part-0-100.parquet"
	o, err := s.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if o.Name() != name {
		t.Errorf("Name() = %q", o.Name())
	}
	for _, chunk := range []string{"PAR1", strings.Repeat("x", 1000), "PAR1"} {
		if _, err := o.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, s, ""); len(got) != 0 {
		t.Errorf("unpublished object listed: %v", got)
	}
	if _, err := s.Open(ctx, name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open before publish: %v", err)
	}
	if err := o.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s, name); string(got) != "PAR1"+strings.Repeat("x", 1000)+"PAR1" {
		t.Errorf("content %d bytes", len(got))
	}
	infos, err := s.List(ctx, "clicks/")
	if err != nil || len(infos) != 1 || infos[0].Name != name || infos[0].Size != 1008 || infos[0].ModTime.IsZero() {
		t.Errorf("List: %v %+v", err, infos)
	}
	if _, err := o.Write([]byte("more")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Write after Publish: %v", err)
	}
	if err := o.Publish(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Publish: %v", err)
	}
	if err := o.Abort(ctx); err != nil {
		t.Errorf("Abort after Publish: %v", err)
	}
	if got := read(t, s, name); len(got) != 1008 {
		t.Errorf("Abort after Publish changed the object: %d bytes", len(got))
	}
}

func testLargeObject(t *testing.T, s store.Store, cfg Config) {
	data := make([]byte, cfg.LargeObject)
	rand.New(rand.NewSource(1)).Read(data)
	ctx := context.Background()
	o, err := s.Create(ctx, "big/object.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort(ctx)
	// Odd-sized writes, so part boundaries fall inside them.
	for off := 0; off < len(data); {
		n := min(777_777, len(data)-off)
		if _, err := o.Write(data[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := o.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s, "big/object.bin"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, differ from the %d written", len(got), len(data))
	}

	// Reads at an offset, as a Parquet reader makes them: the tail first,
	// then ranges across a write's end and the end of a 5 MiB part (S3's
	// smallest), the start, and past the end.
	r, err := s.Open(ctx, "big/object.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	end := int64(len(data))
	spans := [][2]int64{{end - 8, end}, {777_000, 778_500}, {0, 4}}
	if part := int64(5 << 20); end > part+500 {
		spans = append(spans, [2]int64{part - 500, part + 500})
	}
	for _, span := range spans {
		buf := make([]byte, span[1]-span[0])
		if n, err := r.ReadAt(buf, span[0]); n != len(buf) || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", len(buf), span[0], n, err)
		}
		if !bytes.Equal(buf, data[span[0]:span[1]]) {
			t.Errorf("ReadAt at %d: bytes differ from those written", span[0])
		}
	}
	if n, err := r.ReadAt(make([]byte, 16), end-8); n != 8 || err != io.EOF {
		t.Errorf("ReadAt across the end = %d, %v; want 8, EOF", n, err)
	}
}

func testEmptyObject(t *testing.T, s store.Store, _ Config) {
	Put(t, s, "a/_SUCCESS", nil)
	if got := read(t, s, "a/_SUCCESS"); len(got) != 0 {
		t.Errorf("empty object has %d bytes", len(got))
	}
	if got := names(t, s, "a/"); len(got) != 1 {
		t.Errorf("List: %v", got)
	}
}

// testPublishNeverReplaces: a name once published keeps its object; a
// second publish of it fails with ErrExists, whatever its size (a large one
// takes the multipart path on S3), and leaves no leftover behind.
func testPublishNeverReplaces(t *testing.T, s store.Store, cfg Config) {
	ctx := context.Background()
	const name = "t/part-1-5-9.parquet"
	Put(t, s, name, []byte("first copy"))
	for _, size := range []int{6, cfg.LargeObject} {
		o, err := s.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Write(bytes.Repeat([]byte("z"), size)); err != nil {
			t.Fatal(err)
		}
		if err := o.Publish(ctx); !errors.Is(err, store.ErrExists) {
			t.Errorf("publishing %d bytes over an existing name: %v, want ErrExists", size, err)
		}
		if err := o.Abort(ctx); err != nil {
			t.Errorf("Abort after a refused Publish: %v", err)
		}
	}
	if got := read(t, s, name); string(got) != "first copy" {
		t.Errorf("content %q, want the first copy", got)
	}
	if got := names(t, s, "t/"); len(got) != 1 {
		t.Errorf("List: %v", got)
	}
	if n, err := s.Cleanup(ctx, "", nil); err != nil || n != 0 {
		t.Errorf("Cleanup after refused publishes found %d leftovers (%v)", n, err)
	}
	// Once removed, the name is free again.
	if err := s.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	Put(t, s, name, []byte("second"))
	if got := read(t, s, name); string(got) != "second" {
		t.Errorf("content after Remove and Publish %q", got)
	}
}

// testPublishAs: an object is published under the name given at the end,
// in another directory too; the name given to Create stays free.
func testPublishAs(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	o, err := s.Create(ctx, "a/part-0-7-7.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write([]byte("rows 7..9")); err != nil {
		t.Fatal(err)
	}
	if err := o.PublishAs(ctx, "a/b/part-0-7-9.parquet"); err != nil {
		t.Fatal(err)
	}
	if got := names(t, s, ""); fmt.Sprint(got) != "[a/b/part-0-7-9.parquet]" {
		t.Errorf("List = %v", got)
	}
	if got := read(t, s, "a/b/part-0-7-9.parquet"); string(got) != "rows 7..9" {
		t.Errorf("content %q", got)
	}
	if err := o.PublishAs(ctx, "a/other"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second PublishAs: %v", err)
	}
	o, err = s.Create(ctx, "a/x")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort(ctx)
	if err := o.PublishAs(ctx, "../escape"); err == nil {
		t.Error("PublishAs accepted a name outside the store")
	}
	if err := o.PublishAs(ctx, "a/b/part-0-7-9.parquet"); !errors.Is(err, store.ErrExists) {
		t.Errorf("PublishAs over an existing name: %v", err)
	}
}

// testRacingPublishes: objects published under one name at the same time
// (a paused former owner and the new one) leave exactly one, whole.
func testRacingPublishes(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	const racers = 6
	objects := make([]store.Object, racers)
	for i := range objects {
		o, err := s.Create(ctx, fmt.Sprintf("race/tmp-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Abort(ctx)
		if _, err := o.Write([]byte(strings.Repeat(fmt.Sprint(i), 1000))); err != nil {
			t.Fatal(err)
		}
		objects[i] = o
	}
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i, o := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = o.PublishAs(ctx, "race/part-0-0-9.parquet")
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("publishes %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrExists):
			t.Errorf("publish %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no publish succeeded")
	}
	if got := read(t, s, "race/part-0-0-9.parquet"); string(got) != strings.Repeat(fmt.Sprint(winner), 1000) {
		t.Errorf("content is not the winner's (%d): %.20q", winner, got)
	}
}

func testAbort(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	Put(t, s, "t/kept", []byte("old"))
	o, err := s.Create(ctx, "t/kept")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write([]byte("new but aborted")); err != nil {
		t.Fatal(err)
	}
	if err := o.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Abort(ctx); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := o.Publish(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Publish after Abort: %v", err)
	}
	if got := read(t, s, "t/kept"); string(got) != "old" {
		t.Errorf("aborted write changed the object: %q", got)
	}
	if got := names(t, s, ""); len(got) != 1 {
		t.Errorf("List: %v", got)
	}
	if n, err := s.Cleanup(ctx, "", nil); err != nil || n != 0 {
		t.Errorf("Cleanup after Abort found %d leftovers (%v)", n, err)
	}
}

func testListPrefix(t *testing.T, s store.Store, _ Config) {
	all := []string{
		"clicks/dt=2024-05-01/hr=09/part-0-0.parquet",
		"clicks/dt=2024-05-01/hr=10/part-0-50.parquet",
		"clicks/dt=2024-05-01/hr=10/part-1-7.parquet",
		"clicks/dt=2024-05-02/hr=00/part-0-90.parquet",
		"clicksx/part-0-0.parquet",
		"logs/dt=2024-05-01/hr=10/part-0-0.parquet",
	}
	for i := len(all) - 1; i >= 0; i-- {
		Put(t, s, all[i], []byte(all[i]))
	}
	cases := map[string][]string{
		"":                                  all,
		"clicks/":                           all[:4],
		"clicks":                            all[:5],
		"clicks/dt=2024-05-01/":             all[:3],
		"clicks/dt=2024-05-01/hr=1":         all[1:3],
		"clicks/dt=2024-05-01/hr=10/part-1": all[2:3],
		"nothing/":                          {},
		"logs/dt=2024-05-01/hr=10/part-0-0.parquet": all[5:],
	}
	for prefix, want := range cases {
		got := names(t, s, prefix)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("List(%q) = %v, want %v", prefix, got, want)
		}
	}
}

func testRemove(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	Put(t, s, "r/a", []byte("a"))
	Put(t, s, "r/b", []byte("b"))
	if err := s.Remove(ctx, "r/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "r/missing"); err != nil {
		t.Errorf("removing a missing object: %v", err)
	}
	if got := names(t, s, "r/"); fmt.Sprint(got) != "[r/b]" {
		t.Errorf("List after Remove: %v", got)
	}
	if _, err := s.Open(ctx, "r/a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open removed: %v", err)
	}
}

// testCleanup models a crashed worker: its unpublished objects are cleaned up
// by the next owner of the partition and can no longer be published, while
// other partitions' objects in progress are left alone.
func testCleanup(t *testing.T, s store.Store, cfg Config) {
	ctx := context.Background()
	Put(t, s, "c/dt=2024-05-01/hr=10/part-3-0.parquet", []byte("published"))
	create := func(name string) store.Object {
		o, err := s.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Write([]byte("partial " + name)); err != nil {
			t.Fatal(err)
		}
		return o
	}
	crashed := []store.Object{
		create("c/dt=2024-05-01/hr=10/part-3-100.parquet"),
		create("c/dt=2024-05-01/hr=11/part-3-150.parquet"),
	}
	other := create("c/dt=2024-05-01/hr=10/part-4-100.parquet")
	outside := create("d/part-3-1.parquet")

	partition3 := func(name string) bool { return strings.Contains(name, "/part-3-") }
	want := len(crashed)
	if cfg.SpoolsLocally {
		want = 0
	}
	n, err := s.Cleanup(ctx, "c/", partition3)
	if err != nil || n != want {
		t.Fatalf("Cleanup = %d, %v; want %d", n, err, want)
	}
	if n, err := s.Cleanup(ctx, "c/", partition3); err != nil || n != 0 {
		t.Errorf("second Cleanup = %d, %v; want 0", n, err)
	}
	for _, o := range crashed {
		if !cfg.SpoolsLocally {
			if err := o.Publish(ctx); err == nil {
				t.Errorf("%s published after its leftover was cleaned up", o.Name())
			}
		}
		o.Abort(ctx)
	}
	for _, o := range []store.Object{other, outside} {
		if err := o.Publish(ctx); err != nil {
			t.Errorf("%s: cleanup touched an object it did not match: %v", o.Name(), err)
		}
	}
	wantNames := "[c/dt=2024-05-01/hr=10/part-3-0.parquet c/dt=2024-05-01/hr=10/part-4-100.parquet d/part-3-1.parquet]"
	if got := names(t, s, ""); fmt.Sprint(got) != wantNames {
		t.Errorf("List = %v, want %v", got, wantNames)
	}
	if cfg.SpoolsLocally {
		return
	}
	// A nil match takes everything under the prefix.
	create("e/x")
	create("e/y/z")
	if n, err := s.Cleanup(ctx, "e/", nil); err != nil || n != 2 {
		t.Errorf("Cleanup(nil match) = %d, %v", n, err)
	}
}

func testInvalidNames(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	for _, name := range []string{"", "/abs", "a/../../b", "../x", "a//b", "a/", ".", "a/.tmp-x"} {
		if o, err := s.Create(ctx, name); err == nil {
			o.Abort(ctx)
			t.Errorf("Create(%q) accepted", name)
		}
	}
}

func testConcurrentObjects(t *testing.T, s store.Store, _ Config) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("p/part-%d-0.parquet", i)
			o, err := s.Create(ctx, name)
			if err != nil {
				errs <- err
				return
			}
			defer o.Abort(ctx)
			for j := 0; j < 10; j++ {
				if _, err := o.Write([]byte(name)); err != nil {
					errs <- err
					return
				}
			}
			errs <- o.Publish(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := names(t, s, "p/"); len(got) != 8 {
		t.Fatalf("List: %v", got)
	}
	if got := read(t, s, "p/part-5-0.parquet"); string(got) != strings.Repeat("p/part-5-0.parquet", 10) {
		t.Errorf("content %q", got)
	}
}

// countingPacer records what it is asked to let through; past stopAfter
// bytes (when set) it cancels the upload's context, as a deadline would.
type countingPacer struct {
	stopAfter int
	cancel    context.CancelFunc

	mu       sync.Mutex
	total    int
	largest  int
	stopping bool
}

func (p *countingPacer) Wait(ctx context.Context, n int) error {
	p.mu.Lock()
	p.total += n
	p.largest = max(p.largest, n)
	if p.stopAfter > 0 && p.total > p.stopAfter {
		p.stopping = true
		p.cancel()
	}
	p.mu.Unlock()
	return ctx.Err()
}

// testPaced: an object created with a Pacer goes to the store through it,
// every byte once and 64 KiB at most at a time, and arrives whole; when
// the pacer's wait ends with the upload's context, nothing is published.
func testPaced(t *testing.T, s store.Store, cfg Config) {
	data := make([]byte, cfg.LargeObject)
	rand.New(rand.NewSource(2)).Read(data)
	upload := func(ctx context.Context, name string) error {
		o, err := s.Create(ctx, name)
		if err != nil {
			return err
		}
		defer o.Abort(context.Background())
		if _, err := o.Write(data); err != nil {
			return err
		}
		return o.Publish(ctx)
	}
	p := &countingPacer{}
	if err := upload(store.WithPacer(context.Background(), p), "paced/whole.bin"); err != nil {
		t.Fatal(err)
	}
	if p.total != len(data) || p.largest > 64<<10 || p.largest == 0 {
		t.Fatalf("the pacer let %d bytes through, at most %d at a time; want the object's %d, at most 64 KiB at a time", p.total, p.largest, len(data))
	}
	if got := read(t, s, "paced/whole.bin"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, differ from the %d written", len(got), len(data))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := &countingPacer{stopAfter: len(data) / 2, cancel: cancel}
	if err := upload(store.WithPacer(ctx, stopped), "paced/stopped.bin"); !errors.Is(err, context.Canceled) {
		t.Fatalf("upload whose pacer's wait ended: %v; want context.Canceled", err)
	}
	if _, err := s.Open(context.Background(), "paced/stopped.bin"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Open of the stopped upload: %v; want ErrNotFound", err)
	}
}
