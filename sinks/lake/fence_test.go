package lake

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeFence answers ownership checks; fenced makes them fail as the
// coordinator does for a member whose session expired.
type fakeFence struct {
	fenced bool
	checks int
}

func (f *fakeFence) check(context.Context, string) error {
	f.checks++
	if f.fenced {
		return fmt.Errorf("%w (test)", errFenced)
	}
	return nil
}

// exactlyOnce fails unless every record of recs landed in exactly one row.
func exactlyOnce(t *testing.T, root string, recs []*kgo.Record) {
	t.Helper()
	seen := map[string]int{}
	for _, ids := range landed(t, root) {
		for _, id := range ids {
			seen[id]++
		}
	}
	if len(seen) != len(recs) {
		t.Errorf("%d distinct events landed, want %d", len(seen), len(recs))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s landed %d times", id, n)
		}
	}
}

func zombieRecords() []*kgo.Record {
	var recs []*kgo.Record
	for i := 0; i < 120; i++ {
		recs = append(recs, click(int64(i), (i/7)%3))
	}
	return recs
}

// TestFencedWorkerPublishesNothing: a worker paused past its session holds
// a window that the new owner has landed with other cut points since; when
// it resumes, the generation check refuses its publish, the window ends in
// an error that stops the worker, and nothing of it is committed or left
// behind.
func TestFencedWorkerPublishesNothing(t *testing.T) {
	recs := zombieRecords()
	root := t.TempDir()
	zombie, zc, _ := testWorker(t, root, nil)
	fence := &fakeFence{}
	zombie.fence = fence
	if err := feed(zombie, recs[:50], 0); err != nil {
		t.Fatal(err)
	}
	owner, _, _ := testWorker(t, root, func(c *Config) { c.RollRows = 70 })
	owner.fence = &fakeFence{}
	if err := feed(owner, recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(owner); err != nil {
		t.Fatal(err)
	}
	fence.fenced = true
	if err := flushAll(zombie); !errors.Is(err, errFenced) {
		t.Fatalf("a fenced worker's window end: %v, want errFenced", err)
	}
	if fence.checks == 0 || len(zc.log) != 0 {
		t.Errorf("zombie: %d checks, commits %v; want a check and no commit", fence.checks, zc.log)
	}
	if zombie.core.openFiles != 0 {
		t.Errorf("zombie holds %d open files after the refused window", zombie.core.openFiles)
	}
	exactlyOnce(t, root, recs)
}

// TestNewOwnerRemovesSupersededFiles: files published past the committed
// offset by owners that never committed them — a whole window of a crashed
// owner, and one straddling the committed offset, from a former owner that
// published in the moment between its check and its publish — are removed
// by the next owner before it lands the same records.
func TestNewOwnerRemovesSupersededFiles(t *testing.T) {
	recs := zombieRecords()
	root := t.TempDir()
	// A former owner, assigned at 30, lands up to 90 without committing.
	former, _, _ := testWorker(t, root, nil)
	if err := feed(former, recs[:90], 30); err != nil {
		t.Fatal(err)
	}
	// Meanwhile its successor landed and committed 0..59.
	successor, sc, _ := testWorker(t, root, func(c *Config) { c.RollRows = 60 })
	if err := feed(successor, recs[:60], 0); err != nil {
		t.Fatal(err)
	}
	if sc.offsets[topicPartition{"clicks", 0}] != 60 {
		t.Fatalf("successor committed %v", sc.log)
	}
	if err := flushAll(former); err != nil { // straddles 60
		t.Fatal(err)
	}
	// A crashed owner published 60..99 and never committed.
	crashed, cc, _ := testWorker(t, root, nil)
	if err := feed(crashed, recs[:100], 60); err != nil {
		t.Fatal(err)
	}
	cc.fail = fmt.Errorf("crash")
	if err := flushAll(crashed); err == nil {
		t.Fatal("the lost commit was not reported")
	}
	// The next owner starts at the committed 60 with other cut points.
	next, _, _ := testWorker(t, root, func(c *Config) { c.RollRows = 25 })
	fence := &fakeFence{}
	next.fence = fence
	if err := feed(next, recs, 60); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(next); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, root, recs)

	// Fenced, the same owner removes nothing: a paused former owner must
	// not take away the files of the one that replaced it.
	before := landed(t, root)
	stale, _, _ := testWorker(t, root, nil)
	stale.fence = &fakeFence{fenced: true}
	if err := feed(stale, recs, 60); !errors.Is(err, errFenced) {
		t.Fatalf("a fenced worker opening a file: %v, want errFenced", err)
	}
	if after := landed(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a fenced worker changed the lake:\n%v\n%v", before, after)
	}
}

func TestFileNames(t *testing.T) {
	name := FileName(7, 42, 1_000_000)
	if name != "part-7-00000000000000000042-00000000000001000000.parquet" {
		t.Errorf("FileName = %s", name)
	}
	if p, first, last, ok := ParseFileName(name); !ok || p != 7 || first != 42 || last != 1_000_000 {
		t.Errorf("ParseFileName(%s) = %d %d %d %v", name, p, first, last, ok)
	}
}

// TestOwnershipCheckWithBroker: the check passes for a member of the
// current generation and reports errFenced once the coordinator has
// removed the member, as it does when its session expires.
func TestOwnershipCheckWithBroker(t *testing.T) {
	addr, _ := startBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("clicks"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollFetches(pctx)
		pcancel()
		if _, generation := member.GroupMetadata(); generation > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the client never joined the group")
		}
	}
	check := &kgoOwnership{client: member, group: "g"}
	id, _ := member.GroupMetadata()
	if err := check.check(ctx, id); err != nil {
		t.Fatalf("a current member: %v", err)
	}
	if err := check.check(ctx, "a-member-before"); !errors.Is(err, errFenced) {
		t.Errorf("a partition assigned to an earlier member: %v, want errFenced", err)
	}
	// The coordinator forgets the member, as after its session timeout.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g"
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = id
	leave.Members = append(leave.Members, m)
	if _, err := leave.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if err := check.check(ctx, id); !errors.Is(err, errFenced) {
		t.Errorf("a removed member: %v, want errFenced", err)
	}
	// Once the client has rejoined under a new id, the partitions of the
	// old one are still fenced.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollFetches(pctx)
		pcancel()
		if now, generation := member.GroupMetadata(); now != id && generation > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the client never rejoined the group")
		}
	}
	if err := check.check(ctx, id); !errors.Is(err, errFenced) {
		t.Errorf("the removed member after the client rejoined: %v, want errFenced", err)
	}
}
