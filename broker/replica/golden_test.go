package replica

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// trace runs events against a Leader and writes one line per event: the
// event, then what it decided.
type trace struct {
	t        *testing.T
	l        *Leader
	b        strings.Builder
	version  int32
	proposal *ISRChange
}

func (tr *trace) ev(name string, d Decisions, err error) {
	tr.t.Helper()
	fmt.Fprintf(&tr.b, "%-34s ->", name)
	if err != nil {
		fmt.Fprintf(&tr.b, " error %v\n", err)
		return
	}
	fmt.Fprintf(&tr.b, " hw=%d", d.HighWatermark)
	if d.HighWatermarkChanged {
		tr.b.WriteString("(moved)")
	}
	fmt.Fprintf(&tr.b, " isr=%v", tr.l.ISR())
	if d.ProposeISR != nil {
		tr.proposal = d.ProposeISR
		fmt.Fprintf(&tr.b, " propose=%v@v%d", d.ProposeISR.ISR, d.ProposeISR.ExpectedVersion)
	}
	if len(d.Completed) > 0 {
		fmt.Fprintf(&tr.b, " completed=%v", d.Completed)
	}
	for _, f := range d.Failed {
		fmt.Fprintf(&tr.b, " failed=%d:%s", f.ID, f.Err.(*KafkaError).Name)
	}
	if d.Fenced {
		tr.b.WriteString(" FENCED")
	}
	tr.b.WriteString("\n")
}

func (tr *trace) fetch(r int32, off int64, sec float64) {
	d, err := tr.l.FollowerFetch(r, off, tr.l.LeaderEpoch(), at(sec))
	tr.ev(fmt.Sprintf("fetch r%d@%d t=%gs", r, off, sec), d, err)
}

func (tr *trace) produce(id RequestID, n int64) {
	if err := tr.l.CheckAcksAll(); err != nil {
		tr.ev(fmt.Sprintf("produce #%d (%d records)", id, n), Decisions{}, err)
		return
	}
	end := tr.l.LogEndOffset() + n
	d1, err := tr.l.Appended(end)
	if err != nil {
		tr.t.Fatal(err)
	}
	d2, err := tr.l.WaitForAcks(id, end-1)
	d2.HighWatermarkChanged = d2.HighWatermarkChanged || d1.HighWatermarkChanged
	d2.Completed = append(d1.Completed, d2.Completed...)
	tr.ev(fmt.Sprintf("produce #%d [%d,%d]", id, end-n, end-1), d2, err)
}

func (tr *trace) tick(sec float64) { tr.ev(fmt.Sprintf("tick t=%gs", sec), tr.l.Tick(at(sec)), nil) }

func (tr *trace) commit() {
	tr.version++
	p := tr.proposal
	tr.proposal = nil
	tr.ev(fmt.Sprintf("isr write %v ok", p.ISR), tr.l.ISRWritten(p.ID, tr.version), nil)
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("trace differs from %s (review, then run with -update):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// The golden sequence of a partition with min.insync.replicas=2: both
// followers stop (the 2013 Jepsen case), the ISR shrinks to the leader, the
// pending write fails and new ones are refused; a follower returns, catches
// up, rejoins, and writes succeed again; then the leader is fenced with a
// write pending.
func TestGoldenJepsenSequence(t *testing.T) {
	l, err := NewLeader(Config{ReplicaLagTimeMax: 10 * time.Second, MinInsyncReplicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	tr := &trace{t: t, l: l}
	d, err := l.BecomeLeader(LeaderState{LocalID: 1, LeaderEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, LogEndOffset: 0}, t0)
	tr.ev("become leader e3 isr=[1 2 3] leo=0", d, err)
	tr.produce(1, 3)
	tr.fetch(2, 0, 0.5)
	tr.fetch(3, 0, 0.5)
	tr.fetch(2, 3, 1)
	tr.fetch(3, 3, 1)
	tr.produce(2, 2)
	tr.tick(5)
	tr.tick(12)
	tr.commit()
	tr.produce(3, 1)
	tr.fetch(2, 3, 20)
	tr.fetch(2, 5, 21)
	tr.commit()
	tr.produce(4, 2)
	tr.fetch(2, 7, 22)
	tr.produce(5, 1)
	tr.ev("fence", l.Fence(), nil)
	tr.fetch(2, 8, 23)
	tr.produce(6, 1)
	checkGolden(t, "jepsen", tr.b.String())
}
