package lake

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

// coreTrace runs events against a lander and writes one line per event:
// the event, then the actions it decided, in order.
type coreTrace struct {
	l *lander
	b strings.Builder
}

var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// at is t0 plus sec seconds.
func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func (tr *coreTrace) line(event string, acts []action) {
	fmt.Fprintf(&tr.b, "%-40s ->", event)
	if len(acts) == 0 {
		tr.b.WriteString(" -")
	}
	for i, a := range acts {
		if i > 0 {
			fmt.Fprintf(&tr.b, "\n%-40s   ", "")
		}
		tr.b.WriteString(" " + a.String())
	}
	fmt.Fprintf(&tr.b, "   [open files %d]\n", tr.l.openFiles)
}

// rec hands the lander record offset of p: kind "row" in bucket hour h
// (hours after t0), "dl" or "repeat"; ts is its record time in seconds
// after t0. A record the window holds already is reported as re-delivered.
func (tr *coreTrace) rec(p int32, offset int64, kind string, h int, ts float64) {
	tp := topicPartition{"clicks", p}
	name := fmt.Sprintf("record %d@%d %s", p, offset, kind)
	if kind == "row" {
		name += fmt.Sprintf(" hr+%d", h)
	}
	name += fmt.Sprintf(" t=%gs", ts)
	if !tr.l.fresh(tp, offset) {
		tr.b.WriteString(fmt.Sprintf("%-40s -> re-delivered, not decided\n", name))
		return
	}
	r := coreRecord{offset: offset, timestamp: at(ts), bucket: t0.Add(time.Duration(h) * time.Hour)}
	switch kind {
	case "dl":
		r.kind = recordDeadLetter
	case "repeat":
		r.kind = recordRepeat
	}
	tr.line(name, tr.l.record(tp, r))
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
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

var coreLimits = landerLimits{rollRows: 4, rollBytes: 1 << 20, rollAge: time.Minute, idleTimeout: 10 * time.Second, maxOpenFiles: 2}

// TestGoldenCuts: one partition's windows end on rows, on record-time age,
// on the files' size and on the idle timeout; dead letters and repeats
// advance a window without a row, a repeat never opens a file, a
// re-delivered record is not decided again, and a bucket is cleared only
// the first time it is opened since the assignment.
func TestGoldenCuts(t *testing.T) {
	limits := coreLimits
	limits.maxOpenFiles = 10
	tr := &coreTrace{l: newLander(limits)}
	tp := topicPartition{"clicks", 0}
	tr.l.delivered(tp, at(0))
	tr.rec(0, 10, "repeat", 0, 0)
	tr.rec(0, 11, "row", 0, 1)
	tr.rec(0, 12, "row", 1, 2)
	tr.rec(0, 11, "row", 0, 1)
	tr.rec(0, 13, "dl", 0, 3)
	tr.rec(0, 14, "row", 0, 4)
	tr.rec(0, 15, "row", 0, 5)
	tr.rec(0, 16, "row", 1, 6)
	tr.rec(0, 17, "row", 0, 80)
	tr.rec(0, 18, "row", 2, 90)
	tr.line("size 2 MiB", tr.l.sized(tp, 2<<20))
	tr.rec(0, 19, "row", 2, 91)
	tr.line("tick t=95s (read at 0s)", tr.l.tick(at(95)))
	tr.l.delivered(tp, at(100))
	tr.rec(0, 20, "dl", 0, 100)
	tr.line("tick t=105s (read at 100s)", tr.l.tick(at(105)))
	tr.line("tick t=110s", tr.l.tick(at(110)))
	tr.line("size 2 MiB, no window", tr.l.sized(tp, 2<<20))
	checkGolden(t, "cuts", tr.b.String())
}

// TestGoldenOpenFiles: with two open files allowed, a record that needs a
// third ends its own window first when that holds files, else the windows
// of other partitions, in partition order.
func TestGoldenOpenFiles(t *testing.T) {
	tr := &coreTrace{l: newLander(coreLimits)}
	tr.rec(0, 0, "row", 0, 0)
	tr.rec(1, 0, "row", 0, 0)
	tr.rec(0, 1, "row", 1, 1)
	tr.rec(2, 0, "row", 3, 1)
	tr.rec(1, 1, "row", 0, 2)
	tr.rec(1, 2, "row", 4, 3)
	checkGolden(t, "open_files", tr.b.String())
}

// TestGoldenRebalance: an undecodable batch skipped at the start of a
// window, revokes (landed while the worker is healthy, discarded after it
// failed), a lost partition, a failure and a shutdown; a partition
// assigned again clears its buckets again.
func TestGoldenRebalance(t *testing.T) {
	tr := &coreTrace{l: newLander(coreLimits)}
	p0, p1, p2 := topicPartition{"clicks", 0}, topicPartition{"clicks", 1}, topicPartition{"clicks", 2}
	next := tr.l.skipped(p0, 5, 9, at(0))
	tr.line(fmt.Sprintf("skip 0@5..8 -> position %d", next), nil)
	tr.rec(0, 8, "row", 0, 1)
	tr.rec(0, 9, "row", 0, 1)
	tr.rec(1, 0, "row", 0, 1)
	tr.rec(2, 0, "dl", 0, 1)
	tr.line("revoke 0", tr.l.revoked(p0, false))
	tr.rec(0, 10, "row", 0, 2)
	tr.line("lost 1", tr.l.lost(p1))
	tr.line("revoke 1 (not assigned)", tr.l.revoked(p1, false))
	tr.line("shutdown", tr.l.shutdown())
	tr.rec(1, 3, "row", 0, 3)
	tr.rec(2, 1, "row", 0, 3)
	tr.line("failed", tr.l.failed())
	tr.rec(2, 2, "row", 0, 4)
	tr.line("revoke 2 after the failure", tr.l.revoked(p2, true))
	checkGolden(t, "rebalance", tr.b.String())
}

// recIdentity hands the lander row offset of p in bucket hour h with the
// identity partition value key value; ts is its record time.
func (tr *coreTrace) recIdentity(p int32, offset int64, h int, ts float64, value string) {
	tp := topicPartition{"clicks", p}
	r := coreRecord{offset: offset, timestamp: at(ts), bucket: t0.Add(time.Duration(h) * time.Hour), value: value}
	tr.line(fmt.Sprintf("record %d@%d row hr+%d %s t=%gs", p, offset, h, value, ts), tr.l.record(tp, r))
}

// TestGoldenIdentity: with identity partitioning, rows of one bucket with
// different values go to different files (a data file holds one partition
// value), each named by its own first row; a value seen again appends to
// its file; null is a value of its own; and the open-file cap counts every
// value's file.
func TestGoldenIdentity(t *testing.T) {
	limits := coreLimits
	limits.rollRows, limits.maxOpenFiles = 6, 3
	tr := &coreTrace{l: newLander(limits)}
	tr.recIdentity(0, 0, 0, 0, `"a"`)
	tr.recIdentity(0, 1, 0, 1, `"b"`)
	tr.recIdentity(0, 2, 0, 2, `"a"`)
	tr.recIdentity(0, 3, 0, 3, `null`)
	tr.recIdentity(0, 4, 1, 4, `"a"`)
	tr.recIdentity(0, 5, 0, 5, `"b"`)
	tr.recIdentity(0, 6, 0, 6, `"b"`)
	tr.line("shutdown", tr.l.shutdown())
	checkGolden(t, "identity", tr.b.String())
}

// TestGoldenDeadLetterBytes: with a bound on a window's dead letters
// (format iceberg holds them in memory), a window lands once its dead
// letters reach it, whether it holds rows or dead letters only; without
// the bound (format hive) only rows, bytes, age and time end a window.
func TestGoldenDeadLetterBytes(t *testing.T) {
	limits := coreLimits
	limits.deadLetterBytes = 100
	tr := &coreTrace{l: newLander(limits)}
	deadLetter := func(offset int64, size int64, ts float64) {
		r := coreRecord{offset: offset, timestamp: at(ts), kind: recordDeadLetter, size: size}
		tr.line(fmt.Sprintf("record 0@%d dl %dB t=%gs", offset, size, ts), tr.l.record(topicPartition{"clicks", 0}, r))
	}
	tr.rec(0, 0, "row", 0, 0)
	deadLetter(1, 60, 1)
	deadLetter(2, 40, 2)
	deadLetter(3, 99, 3)
	deadLetter(4, 1, 4)
	deadLetter(5, 30, 5)
	tr.line("unbounded:", nil)
	tr.l.limits.deadLetterBytes = 0
	deadLetter(6, 1000, 6)
	tr.line("shutdown", tr.l.shutdown())
	checkGolden(t, "dead_letter_bytes", tr.b.String())
}
