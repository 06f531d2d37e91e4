package tier

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/log"
	"millrace/internal/leaktest"
	"millrace/internal/recordbatch/batchtest"
	"millrace/store"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// testTopicID is the topic ID of the tests' partition.
var testTopicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// env is one test's remote storage: a file store and an embedded
// coordination store, each in a temporary directory.
type env struct {
	t     *testing.T
	store *store.File
	coord coord.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cs, err := srv.Session()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &env{t: t, store: st, coord: cs}
}

// manager returns a manager over the env's stores for parts, with
// coordination through cs (the env's when nil).
func (e *env) manager(cs coord.Store, parts ...Partition) *Manager {
	e.t.Helper()
	if cs == nil {
		cs = e.coord
	}
	cfg := DefaultConfig()
	cfg.Enable, cfg.URL = true, "file://"+e.store.Root()
	m, err := New(cfg, e.store, cs, Host{
		Partitions: func() []Partition { return parts },
		TopicIDs:   func() map[string][16]byte { return map[string][16]byte{"t": testTopicID} },
		Controller: func() bool { return true },
	}, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// state reads the test partition's remote state.
func (e *env) state() State {
	e.t.Helper()
	st, _, _, err := ReadState(e.coord, "t", 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// objects lists every published object of the store.
func (e *env) objects() []string {
	e.t.Helper()
	infos, err := e.store.List(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, o := range infos {
		names = append(names, o.Name)
	}
	return names
}

// openTieredLog opens a remote.storage.enable log with one segment per
// boundary run: every element of runs is the number of one-record batches
// of a closed segment; an active segment with one more batch follows.
func openTieredLog(t *testing.T, runs ...int) *log.Log {
	t.Helper()
	cfg := log.DefaultConfig()
	cfg.RemoteStorageEnable = true
	cfg.Retention = -1
	l, err := log.Open(filepath.Join(t.TempDir(), "t-0"), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ts := time.Now().UnixMilli()
	for _, n := range runs {
		for range n {
			if _, err := l.Append(batchtest.Make(1, 100, ts, byte(l.EndOffset())), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(batchtest.Make(1, 100, ts, byte(l.EndOffset())), 0); err != nil {
		t.Fatal(err)
	}
	return l
}

// leader is the test partition led at epoch.
func leader(l *log.Log, epoch int32) Partition {
	return Partition{Topic: "t", TopicID: testTopicID, Partition: 0, Log: l, Leader: true, LeaderEpoch: epoch, HighWatermark: -1}
}

// ranges lists the offset ranges of st's segments.
func ranges(st State) [][2]int64 {
	var out [][2]int64
	for _, s := range st.Segments {
		out = append(out, [2]int64{s.BaseOffset, s.LastOffset})
	}
	return out
}

// checkLogObject fails unless the .log object of seg holds exactly the
// local segment file's bytes.
func (e *env) checkLogObject(l *log.Log, seg Segment) {
	e.t.Helper()
	local, err := os.ReadFile(filepath.Join(l.Dir(), segmentFileName(seg.BaseOffset, LogSuffix)))
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := e.store.Open(context.Background(), seg.Key+LogSuffix)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	remote := make([]byte, r.Size())
	if _, err := r.ReadAt(remote, 0); err != nil {
		e.t.Fatal(err)
	}
	if !bytes.Equal(local[:seg.Size], remote) || int64(len(remote)) != seg.Size {
		e.t.Fatalf("object %s: %d bytes, not the local segment's %d", seg.Key+LogSuffix, len(remote), seg.Size)
	}
}

// failingCoord fails every write of the remote state while fail is set:
// a broker that dies between publishing objects and recording them.
type failingCoord struct {
	coord.Store
	fail bool
}

var errInjected = errors.New("injected: the broker died before recording the upload")

func (f *failingCoord) Create(path string, data []byte, mode coord.CreateMode) (string, error) {
	if f.fail && strings.Count(path, "/") == strings.Count(StatePath("t", 0), "/") {
		return "", errInjected
	}
	return f.Store.Create(path, data, mode)
}

func (f *failingCoord) Set(path string, data []byte, version int32) (coord.Stat, error) {
	if f.fail {
		return coord.Stat{}, errInjected
	}
	return f.Store.Set(path, data, version)
}
