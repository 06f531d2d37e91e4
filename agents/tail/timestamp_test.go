package tail

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone database, whatever the machine has

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/audit"
	"millrace/internal/waitfor"
)

func TestTimestampParse(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		ts   Timestamp
		line string
		now  time.Time // zero: now
		want time.Time // zero: not parsed
	}{
		{"rfc3339 with zone", Timestamp{Pattern: `^(\S+) `}, "2026-12-02T03:04:05.123+01:00 GET /",
			time.Time{}, time.Date(2026, 12, 2, 2, 4, 5, 123e6, time.UTC)},
		{"rfc3339 without fraction", Timestamp{Pattern: `^(\S+) `}, "2026-12-02T03:04:05Z GET /",
			time.Time{}, time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)},
		{"rfc3339 without zone, in timezone", Timestamp{Pattern: `^(\S+) `, Timezone: "Europe/Paris"}, "2026-07-02T03:04:05.5 GET /",
			time.Time{}, time.Date(2026, 7, 2, 1, 4, 5, 5e8, time.UTC)},
		{"unix", Timestamp{Pattern: `ts=(\S+)`, Layout: LayoutUnix}, "level=info ts=1764644645 msg=x",
			time.Time{}, time.Unix(1764644645, 0)},
		{"unix with fraction", Timestamp{Pattern: `ts=(\S+)`, Layout: LayoutUnix}, "level=info ts=1764644645.25 msg=x",
			time.Time{}, time.Unix(1764644645, 25e7)},
		{"unix_ms", Timestamp{Pattern: `"time":(\d+)`, Layout: LayoutUnixMs}, `{"time":1764644645123,"msg":"x"}`,
			time.Time{}, time.UnixMilli(1764644645123)},
		{"go layout in timezone", Timestamp{Pattern: `^\[([^]]+)\]`, Layout: "2006-01-02 15:04:05.000", Timezone: "Europe/Paris"}, "[2026-12-02 03:04:05.678] boot",
			time.Time{}, time.Date(2026, 12, 2, 3, 4, 5, 678e6, paris)},
		{"go layout with its own zone", Timestamp{Pattern: `^(\S+ \S+ \S+) `, Layout: "02/Jan/2006:15:04:05 -0700 MST"}, "02/Dec/2026:03:04:05 -0500 EST x",
			time.Time{}, time.Date(2026, 12, 2, 8, 4, 5, 0, time.UTC)},
		{"syslog, no year: the read time's", Timestamp{Pattern: `^(\w{3} [ \d]\d \S+) `, Layout: time.Stamp}, "Dec  2 03:04:05 host sshd[1]: x",
			time.Time{}, time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)},
		{"syslog, no year, read after New Year", Timestamp{Pattern: `^(\w{3} [ \d]\d \S+) `, Layout: time.Stamp}, "Dec 31 23:59:59 host x",
			time.Date(2027, 1, 1, 0, 0, 2, 0, time.UTC), time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"no match", Timestamp{Pattern: `^(\d{4}-\S+) `}, "continuation without a time", time.Time{}, time.Time{}},
		{"capture does not parse", Timestamp{Pattern: `^(\S+) `}, "yesterday GET /", time.Time{}, time.Time{}},
		{"unix_ms not a number", Timestamp{Pattern: `^(\S+) `, Layout: LayoutUnixMs}, "12ab x", time.Time{}, time.Time{}},
		{"unix negative", Timestamp{Pattern: `^(\S+) `, Layout: LayoutUnix}, "-5.5 x", time.Time{}, time.Time{}},
		{"optional group not taken", Timestamp{Pattern: `^(?:(\d+) )?x`, Layout: LayoutUnix}, "x y", time.Time{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newTimestampParser(tc.ts.withDefaults())
			if err != nil {
				t.Fatal(err)
			}
			at := now
			if !tc.now.IsZero() {
				at = tc.now
			}
			// Twice: the second answer comes from the cache of the last text.
			for range 2 {
				got, ok := p.parse([]byte(tc.line), at)
				if ok != !tc.want.IsZero() || ok && !got.Equal(tc.want) {
					t.Fatalf("parse(%q) = %v, %v; want %v", tc.line, got, ok, tc.want)
				}
			}
		})
	}
}

func TestTimestampCacheKeepsTheTextItParsed(t *testing.T) {
	p, err := newTimestampParser(Timestamp{Pattern: `^(\S+) `}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	// The tailer reuses its read buffer: the cached text must be a copy.
	line := []byte("2026-12-02T03:04:05Z a")
	if _, ok := p.parse(line, time.Now()); !ok {
		t.Fatal("not parsed")
	}
	copy(line, "2026-12-02T04:04:05Z a")
	got, ok := p.parse(line, time.Now())
	if want := time.Date(2026, 12, 2, 4, 4, 5, 0, time.UTC); !ok || !got.Equal(want) {
		t.Fatalf("after the buffer changed: %v, %v; want %v", got, ok, want)
	}
}

func TestTimestampValidate(t *testing.T) {
	base := testConfig(t.TempDir(), t.TempDir())
	for _, tc := range []struct {
		name string
		ts   Timestamp
		want string // in the error; empty: valid
	}{
		{"off", Timestamp{}, ""},
		{"rfc3339 by default", Timestamp{Pattern: `^(\S+)`}, ""},
		{"named group", Timestamp{Pattern: `^(?P<ts>\S+)`, Layout: "2006-01-02T15:04:05"}, ""},
		{"no group", Timestamp{Pattern: `^\S+`}, "has 0 capture groups; it needs exactly one"},
		{"two groups", Timestamp{Pattern: `^(\S+) (\S+)`}, "has 2 capture groups; it needs exactly one"},
		{"bad regexp", Timestamp{Pattern: `^(\S+`}, "timestamp.pattern: error parsing regexp"},
		{"layout without elements", Timestamp{Pattern: `^(\S+)`, Layout: "yyyy-mm-dd HH:MM:SS"}, "has no Go time elements"},
		{"layout without the hour", Timestamp{Pattern: `^(\S+)`, Layout: "2006-01-02"}, "must give the month, day and hour"},
		{"layout without the day", Timestamp{Pattern: `^(\S+)`, Layout: "15:04:05"}, "must give the month, day and hour"},
		{"12-hour clock without PM", Timestamp{Pattern: `^(\S+)`, Layout: "2006-01-02 03:04:05"}, "must give the month, day and hour"},
		{"12-hour clock with PM", Timestamp{Pattern: `^(.+) x`, Layout: "2006-01-02 03:04:05 PM"}, ""},
		{"unknown timezone", Timestamp{Pattern: `^(\S+)`, Timezone: "Mars/Olympus"}, "timestamp.timezone"},
		{"layout without pattern", Timestamp{Layout: LayoutUnix}, "pattern is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Timestamp = tc.ts
			err := cfg.WithDefaults().Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestTimestampFromLine ships lines whose text names an hour long past,
// one that the pattern misses and one whose capture does not parse: the
// first gets the named time as ts and is counted by the audit in its hour;
// the other two get the read time (counted in the metric); every record
// timestamp stays the read time.
func TestTimestampFromLine(t *testing.T) {
	dir, dataDir := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	past := time.Now().UTC().Add(-5 * time.Hour).Truncate(time.Second)
	writeFile(t, path, fmt.Sprintf("%s INFO old\nno time here\nnot-a-time INFO x\n", past.Format(time.RFC3339)))
	cfg := testConfig(dir, dataDir)
	cfg.Timestamp = Timestamp{Pattern: `^(\S+) INFO`}
	sink := &auditSink{}
	counter, err := audit.NewCounter(audit.Config{}, audit.RoleTail, "tail-1", true, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := &heldProducer{}
	tl, err := New(cfg, p, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	tl.SetAudit(counter)
	begin := time.Now()
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 20*time.Second, "3 lines sent", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.recs) == 3 })
	end := time.Now()
	readTime := func(ts time.Time) bool { return !ts.Before(begin) && !ts.After(end) }
	p.mu.Lock()
	for i, r := range p.recs {
		// Before the ack, which hands the value's space back for reuse.
		var l logLine
		if err := json.Unmarshal(r.Value, &l); err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, l.TS)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !ts.Equal(past) || i > 0 && !readTime(ts) {
			t.Errorf("line %q: ts %s; want %s", l.Line, l.TS, map[bool]string{true: past.Format(time.RFC3339), false: "the read time"}[i == 0])
		}
		if !readTime(r.Timestamp) {
			t.Errorf("line %q: record timestamp %s, want the read time", l.Line, r.Timestamp)
		}
	}
	p.mu.Unlock()
	for i := range 3 {
		p.ack(i, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tl.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(tl.metrics.unparsed); got != 2 {
		t.Errorf("millrace_tail_timestamp_unparsed_total = %v, want 2", got)
	}

	counts, err := ReadAuditCounts(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	byHour := map[string]int64{}
	for _, c := range counts {
		byHour[c.Hour] += c.Accepted
	}
	// The two unparsed lines were read in one chunk: one read time, one hour.
	readHour := ""
	for h := range byHour {
		if h != audit.Hour(past) {
			readHour = h
		}
	}
	if len(byHour) != 2 || byHour[audit.Hour(past)] != 1 || byHour[readHour] != 2 ||
		readHour != audit.Hour(begin) && readHour != audit.Hour(end) {
		t.Errorf("audit counts by hour %v, want 1 in %s (the hour the line names) and 2 in the hour they were read", byHour, audit.Hour(past))
	}
}

// BenchmarkTimestampParse is the per-line cost of timestamp.pattern on a
// line like the tailer benchmark's, every line a new millisecond.
func BenchmarkTimestampParse(b *testing.B) {
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	lines := make([][]byte, 1000)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, "%s INFO request id=%d path=/api/v1/items status=200 abcdefghij", start.Add(time.Duration(i)*time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00"), i)
	}
	for _, bc := range []struct{ name, pattern, layout string }{
		{"rfc3339", `^(\S+) `, LayoutRFC3339},
		{"go-layout", `^(\S+) `, "2006-01-02T15:04:05.000Z07:00"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := newTimestampParser(Timestamp{Pattern: bc.pattern, Layout: bc.layout}.withDefaults())
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			b.ReportAllocs()
			for i := range b.N {
				if _, ok := p.parse(lines[i%len(lines)], now); !ok {
					b.Fatal("not parsed")
				}
			}
		})
	}
}
