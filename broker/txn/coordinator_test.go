package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"

	"millrace/internal/waitfor"
)

// fakeMarkers records the markers written; while failing is set every
// write fails.
type fakeMarkers struct {
	mu      sync.Mutex
	written []Markers
	failing atomic.Bool
}

func (f *fakeMarkers) WriteMarkers(_ context.Context, m Markers) error {
	if f.failing.Load() {
		return errors.New("leader not available")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = append(f.written, m)
	return nil
}

func (f *fakeMarkers) all() []Markers {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Markers(nil), f.written...)
}

// clock is a settable test clock.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

type fixture struct {
	store   coord.Store
	markers *fakeMarkers
	clock   *clock
	nextID  atomic.Int64
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	server, err := embedded.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := server.Session()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		store.Close()
		server.Close()
	})
	f := &fixture{store: store, markers: &fakeMarkers{}, clock: &clock{}}
	f.clock.ms.Store(1_700_000_000_000)
	f.nextID.Store(1000)
	return f
}

// coordinator starts a coordinator on the fixture's store; change adjusts
// its config.
func (f *fixture) coordinator(t testing.TB, change func(*Config)) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Markers = f.markers
	cfg.NewProducerID = func() (int64, error) { return f.nextID.Add(1), nil }
	cfg.Now = f.clock.now
	if change != nil {
		change(&cfg)
	}
	c, err := New(f.store, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { c.Close() })
	return c
}

// waitState waits until id's stored state is want.
func waitState(t *testing.T, c *Coordinator, id string, want State) Metadata {
	t.Helper()
	var m Metadata
	waitfor.Until(t, 5*time.Second, fmt.Sprintf("%s in state %s", id, want), func() bool {
		var code int16
		m, code = c.Describe(id)
		return code == 0 && m.State == want
	})
	return m
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	f := newFixture(t)
	c := f.coordinator(t, nil)
	p, code := c.InitProducer("User:test", "tx/1", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	if code != 0 || p.ID != 1001 || p.Epoch != 0 {
		t.Fatalf("InitProducer: %+v code %d", p, code)
	}
	if code := c.AddPartitions("tx/1", p, map[string][]int32{"a": {0, 1}}); code != 0 {
		t.Fatalf("AddPartitions: %d", code)
	}
	if code := c.AddPartitions("tx/1", p, map[string][]int32{"a": {1}, "b": {2}}); code != 0 {
		t.Fatalf("AddPartitions again: %d", code)
	}
	if code := c.AddGroup("tx/1", p, "g"); code != 0 {
		t.Fatalf("AddGroup: %d", code)
	}
	m, _ := c.Describe("tx/1")
	if m.State != Ongoing || !reflect.DeepEqual(m.Partitions, map[string][]int32{"a": {0, 1}, "b": {2}}) || !reflect.DeepEqual(m.Groups, []string{"g"}) {
		t.Fatalf("ongoing transaction: %+v", m)
	}
	if code := c.EndTransaction("tx/1", p, true); code != 0 {
		t.Fatalf("EndTransaction: %d", code)
	}
	waitState(t, c, "tx/1", CompleteCommit)
	got := f.markers.all()
	if len(got) != 1 || !got[0].Commit || got[0].ProducerID != p.ID || got[0].ProducerEpoch != p.Epoch ||
		!reflect.DeepEqual(got[0].Partitions, m.Partitions) || !reflect.DeepEqual(got[0].Groups, []string{"g"}) {
		t.Fatalf("markers %+v", got)
	}
	// A retried EndTxn gets its answer again; the opposite decision is refused.
	if code := c.EndTransaction("tx/1", p, true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	if code := c.EndTransaction("tx/1", p, false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %d", code)
	}
	// The next transaction starts afresh.
	if code := c.AddPartitions("tx/1", p, map[string][]int32{"c": {0}}); code != 0 {
		t.Fatalf("next transaction: %d", code)
	}
	if m, _ := c.Describe("tx/1"); !reflect.DeepEqual(m.Partitions, map[string][]int32{"c": {0}}) || m.Groups != nil {
		t.Fatalf("next transaction holds %+v %v", m.Partitions, m.Groups)
	}
}

func TestNewProducerFencesAndAbortsTheOngoingTransaction(t *testing.T) {
	f := newFixture(t)
	c := f.coordinator(t, nil)
	none := ProducerIDAndEpoch{ID: -1, Epoch: -1}
	old, _ := c.InitProducer("User:test", "t", time.Minute, none)
	if code := c.AddPartitions("t", old, map[string][]int32{"a": {0}}); code != 0 {
		t.Fatal(code)
	}
	if _, code := c.InitProducer("User:test", "t", time.Minute, none); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducer during a transaction: %d, want CONCURRENT_TRANSACTIONS", code)
	}
	waitState(t, c, "t", CompleteAbort)
	got := f.markers.all()
	if len(got) != 1 || got[0].Commit || got[0].ProducerEpoch != old.Epoch+1 {
		t.Fatalf("abort markers %+v, want one abort at epoch %d", got, old.Epoch+1)
	}
	p, code := c.InitProducer("User:test", "t", time.Minute, none)
	if code != 0 || p.ID != old.ID || p.Epoch != old.Epoch+2 {
		t.Fatalf("retried InitProducer: %+v %d", p, code)
	}
	if code := c.AddPartitions("t", old, map[string][]int32{"a": {0}}); code != kerr.ProducerFenced.Code {
		t.Fatalf("old producer's AddPartitions: %d, want PRODUCER_FENCED", code)
	}
	if code := c.EndTransaction("t", ProducerIDAndEpoch{ID: 1, Epoch: p.Epoch}, true); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("EndTransaction with another producer ID: %d", code)
	}
}

func TestInitProducerWithExpectedEpoch(t *testing.T) {
	f := newFixture(t)
	c := f.coordinator(t, nil)
	p0, _ := c.InitProducer("User:test", "t", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	p1, code := c.InitProducer("User:test", "t", time.Minute, p0)
	if code != 0 || p1.ID != p0.ID || p1.Epoch != p0.Epoch+1 {
		t.Fatalf("bump: %+v %d", p1, code)
	}
	// The bump's answer was lost: the same request gets the same answer.
	if again, code := c.InitProducer("User:test", "t", time.Minute, p0); code != 0 || again != p1 {
		t.Fatalf("retried bump: %+v %d, want %+v", again, code, p1)
	}
	if _, code := c.InitProducer("User:test", "t", time.Minute, ProducerIDAndEpoch{ID: p0.ID, Epoch: 9}); code != kerr.ProducerFenced.Code {
		t.Fatalf("unknown epoch: %d, want PRODUCER_FENCED", code)
	}
	for _, d := range []time.Duration{0, DefaultMaxTimeout + time.Millisecond} {
		if _, code := c.InitProducer("User:test", "t", d, ProducerIDAndEpoch{ID: -1, Epoch: -1}); code != kerr.InvalidTransactionTimeout.Code {
			t.Errorf("timeout %v: %d, want INVALID_TRANSACTION_TIMEOUT", d, code)
		}
	}
}

func TestEpochExhaustionGivesANewProducerID(t *testing.T) {
	m := newMetadata("t", "User:test", 5, 1000, 0)
	m.ProducerEpoch = math.MaxInt16 - 1
	next, write, _, code, err := initProducer(m, ProducerIDAndEpoch{ID: -1, Epoch: -1}, 1000, 1, func() (int64, error) { return 6, nil })
	if err != nil || code != 0 || !write || next.ProducerID != 6 || next.ProducerEpoch != 0 || next.LastProducerID != 5 || next.LastProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("exhausted epoch: %+v write=%v code=%d err=%v", next, write, code, err)
	}
}

func TestMarkersRetriedUntilWritten(t *testing.T) {
	f := newFixture(t)
	c := f.coordinator(t, nil)
	p, _ := c.InitProducer("User:test", "t", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	c.AddPartitions("t", p, map[string][]int32{"a": {0}})
	f.markers.failing.Store(true)
	if code := c.EndTransaction("t", p, false); code != 0 {
		t.Fatal(code)
	}
	if code := c.AddPartitions("t", p, map[string][]int32{"a": {0}}); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("AddPartitions while markers are written: %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if code := c.EndTransaction("t", p, false); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("retried EndTransaction while markers are written: %d", code)
	}
	f.markers.failing.Store(false)
	waitState(t, c, "t", CompleteAbort)
}

// A coordinator that stopped with markers unwritten leaves the decision in
// the store; the next coordinator of the ID writes them.
func TestTakeoverCompletesADecidedTransaction(t *testing.T) {
	f := newFixture(t)
	first := f.coordinator(t, nil)
	p, _ := first.InitProducer("User:test", "t", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	first.AddPartitions("t", p, map[string][]int32{"a": {0}})
	f.markers.failing.Store(true)
	if code := first.EndTransaction("t", p, true); code != 0 {
		t.Fatal(code)
	}
	first.Close()
	f.markers.failing.Store(false)
	second := f.coordinator(t, nil)
	waitState(t, second, "t", CompleteCommit)
	if got := f.markers.all(); len(got) != 1 || !got[0].Commit {
		t.Fatalf("markers %+v", got)
	}
}

func TestNotOwnedIDsAreRefusedAndLeftAlone(t *testing.T) {
	f := newFixture(t)
	owner := f.coordinator(t, nil)
	p, _ := owner.InitProducer("User:test", "t", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	owner.AddPartitions("t", p, map[string][]int32{"a": {0}})
	f.markers.failing.Store(true)
	owner.EndTransaction("t", p, true)
	owner.Close()
	f.markers.failing.Store(false)
	other := f.coordinator(t, func(cfg *Config) {
		cfg.Owner = func(string) (bool, uint64) { return false, 1 }
	})
	if _, code := other.InitProducer("User:test", "t", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1}); code != kerr.NotCoordinator.Code {
		t.Fatalf("InitProducer elsewhere: %d", code)
	}
	if _, code := other.Describe("t"); code != kerr.NotCoordinator.Code {
		t.Fatalf("Describe elsewhere: %d", code)
	}
	if list, _ := other.List(nil, nil); len(list) != 0 {
		t.Fatalf("List elsewhere: %+v", list)
	}
	other.pass()
	if m, _, _, _ := load(f.store, "t"); m.State != PrepareCommit {
		t.Fatalf("a broker that does not own the ID changed it to %s", m.State)
	}
}

func TestTimeoutAbortsUnderABumpedEpoch(t *testing.T) {
	f := newFixture(t)
	c := f.coordinator(t, nil)
	p, _ := c.InitProducer("User:test", "t", 10*time.Second, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	c.AddPartitions("t", p, map[string][]int32{"a": {0}})
	c.pass()
	if m, _ := c.Describe("t"); m.State != Ongoing {
		t.Fatalf("before the timeout: %s", m.State)
	}
	f.clock.advance(10*time.Second + time.Millisecond)
	c.pass()
	m := waitState(t, c, "t", CompleteAbort)
	if m.ProducerEpoch != p.Epoch+1 {
		t.Fatalf("epoch after the timeout %d, want %d", m.ProducerEpoch, p.Epoch+1)
	}
	if code := c.EndTransaction("t", p, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("the timed-out producer's commit: %d, want PRODUCER_FENCED", code)
	}
}

func TestIdleIDExpires(t *testing.T) {
	f := newFixture(t)
	c := f.coordinator(t, func(cfg *Config) { cfg.IDExpiration, cfg.MaxTimeout = time.Hour, 2*time.Hour })
	c.InitProducer("User:test", "idle", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	busy, _ := c.InitProducer("User:test", "busy", time.Hour+time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	c.AddPartitions("busy", busy, map[string][]int32{"a": {0}})
	f.clock.advance(time.Hour + time.Millisecond)
	c.pass()
	if _, code := c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("expired ID: %d, want TRANSACTIONAL_ID_NOT_FOUND", code)
	}
	if m, code := c.Describe("busy"); code != 0 || m.State != Ongoing {
		t.Fatalf("ID with a transaction in progress: %+v %d", m, code)
	}
	list, _ := c.List([]State{Ongoing}, nil)
	if len(list) != 1 || list[0].TransactionalID != "busy" {
		t.Fatalf("List Ongoing: %+v", list)
	}
}

// A write based on a stale read loses to the writer that came first.
func TestStaleWriteConflicts(t *testing.T) {
	f := newFixture(t)
	if err := ensureRoot(f.store); err != nil {
		t.Fatal(err)
	}
	m := newMetadata("a/b%", "User:test", 1, 1000, 0)
	if _, err := save(f.store, m, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := save(f.store, m, -1); !errors.Is(err, errConflict) {
		t.Fatalf("second create: %v", err)
	}
	got, version, found, err := load(f.store, "a/b%")
	if err != nil || !found || got.TransactionalID != "a/b%" {
		t.Fatalf("load: %+v %v %v", got, found, err)
	}
	if _, err := save(f.store, got, version); err != nil {
		t.Fatal(err)
	}
	if _, err := save(f.store, got, version); !errors.Is(err, errConflict) {
		t.Fatalf("stale write: %v", err)
	}
}
