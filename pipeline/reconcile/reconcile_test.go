package reconcile

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"millrace/audit"
)

func agent(role, topic, source, hour string, accepted int64) audit.Entry {
	return audit.Entry{Record: audit.Record{Role: role, Instance: "a1", Topic: topic, Source: source, Hour: hour,
		Accepted: accepted, Distinct: role == audit.RoleTail}, SinkOffset: -1}
}

func sink(partition, topic, source, hour string, offset, landed, dedup, dead int64) audit.Entry {
	return audit.Entry{Record: audit.Record{Role: audit.RoleSink, Instance: "g/" + topic + "/" + partition, Topic: topic, Source: source,
		Hour: hour, Landed: landed, Deduplicated: dedup, DeadLettered: dead}, SinkOffset: offset}
}

func TestReconcile(t *testing.T) {
	const h1, h2, h3 = "2026-12-02T03", "2026-12-02T04", "2026-12-02T05"
	since := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	lake := &Lake{
		Rows: map[string]audit.RowCounts{
			"logs":   {h1: {"web:/a": 10, "web:/b": 4}, h2: {"web:/a": 7}, h3: {"web:/a": 2}},
			"clicks": {h1: {"example.com": 5}},
		},
		Complete: map[string]map[string]bool{"logs": {h2: true}, "clicks": {h1: true}},
	}
	entries := []audit.Entry{
		agent(audit.RoleTail, "logs", "web:/a", h1, 10),
		agent(audit.RoleTail, "logs", "web:/b", h1, 5), // one dead-lettered
		agent(audit.RoleTail, "logs", "web:/a", h2, 9), // 2 rows missing from the lake
		agent(audit.RoleTail, "logs", "web:/a", h3, 2), // after the newest marker: open
		agent(audit.RoleBeacon, "clicks", "example.com", h1, 8),
		sink("0", "logs", "web:/b", h1, 50, 4, 0, 1),
		sink("0", "logs", "web:/a", h2, 40, 7, 0, 0),
		sink("0", "logs", "web:/a", h2, 90, 9, 0, 0), // the newer count wins
		sink("0", "logs", "web:/a", h2, 60, 8, 0, 0), // published late by a zombie: older
		sink("0", "clicks", "example.com", h1, 9, 5, 3, 0),
	}
	r := Reconcile(Input{Records: audit.Latest(entries), Lake: lake, Since: since})
	want := map[string]string{
		"logs web:/a " + h1:        StatusOK,
		"logs web:/b " + h1:        StatusOK,
		"logs web:/a " + h2:        StatusMismatch,
		"logs web:/a " + h3:        StatusOpen,
		"clicks example.com " + h1: StatusOK,
	}
	if len(r.Lines) != len(want) {
		t.Fatalf("lines %+v, want %d", r.Lines, len(want))
	}
	for _, l := range r.Lines {
		k := l.Topic + " " + l.Source + " " + l.Hour
		if l.Status != want[k] {
			t.Errorf("%s: status %s (%s), want %s", k, l.Status, l.Problem, want[k])
		}
	}
	if r.Unreconciled != 1 || r.Open != 1 {
		t.Errorf("unreconciled %d open %d, want 1 and 1", r.Unreconciled, r.Open)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "not reconciled: topic logs, source web:/a, hour "+h2+
		": 9 accepted but landed + dead-lettered = 7; the sink landed 9 rows but the lake holds 7: files are missing") {
		t.Errorf("report does not name the bad hour:\n%s", out.String())
	}

	// The same records filtered to clicks: logs' mismatch is not counted.
	if r := Reconcile(Input{Records: audit.Latest(entries), Lake: lake, Topic: "clicks", Since: since}); r.Unreconciled != 0 || len(r.Lines) != 1 {
		t.Errorf("clicks only: %+v", r)
	}
}

// TestReconcileKilledRun: a beacon restarted cleanly adds its runs' totals;
// one that was killed leaves the hours around its end unknown when the lake
// holds more than was counted, and a mismatch when it holds less.
func TestReconcileKilledRun(t *testing.T) {
	const h1, h2, h3 = "2026-12-02T03", "2026-12-02T04", "2026-12-02T09"
	at := func(h string, min int) time.Time {
		t0, _ := audit.ParseHour(h)
		return t0.Add(time.Duration(min) * time.Minute)
	}
	since := at(h1, 0)
	now := at(h3, 30)
	run := func(id string, start, seen time.Time, stopped bool) audit.Run {
		return audit.Run{Role: audit.RoleBeacon, Instance: "b", ID: id, StartedAt: start, SeenAt: seen, Stopped: stopped,
			HeartbeatSeconds: 60, SkewSeconds: 60}
	}
	beacon := func(runID, hour string, n int64) audit.Entry {
		return audit.Entry{Record: audit.Record{Role: audit.RoleBeacon, Instance: "b", Run: runID, Topic: "clicks", Source: "shop",
			Hour: hour, Accepted: n}, SinkOffset: -1}
	}
	complete := map[string]map[string]bool{"clicks": {h3: true}}
	for _, c := range []struct {
		name   string
		runs   []audit.Run
		counts []audit.Entry
		landed map[string]int64 // per hour
		want   map[string]string
	}{{
		name:   "clean restart: the runs add up",
		runs:   []audit.Run{run("r1", at(h1, 0), at(h1, 20), true), run("r2", at(h1, 21), at(h3, 29), false)},
		counts: []audit.Entry{beacon("r1", h1, 4), beacon("r2", h1, 1)},
		landed: map[string]int64{h1: 5},
		want:   map[string]string{h1: StatusOK},
	}, {
		name:   "killed and restarted: more landed than counted is unknown, in its hour only",
		runs:   []audit.Run{run("r1", at(h1, 0), at(h1, 20), false), run("r2", at(h1, 21), at(h3, 29), false)},
		counts: []audit.Entry{beacon("r1", h1, 3), beacon("r2", h1, 1), beacon("r2", h2, 2)},
		landed: map[string]int64{h1: 5, h2: 3},
		want:   map[string]string{h1: StatusUnknown, h2: StatusMismatch},
	}, {
		name:   "killed: less landed than counted is a loss",
		runs:   []audit.Run{run("r1", at(h1, 0), at(h1, 20), false), run("r2", at(h1, 21), at(h3, 29), false)},
		counts: []audit.Entry{beacon("r1", h1, 3), beacon("r2", h1, 1)},
		landed: map[string]int64{h1: 3},
		want:   map[string]string{h1: StatusMismatch},
	}, {
		name:   "killed and never restarted: dead once its heartbeats stop",
		runs:   []audit.Run{run("r1", at(h1, 0), at(h1, 20), false)},
		counts: []audit.Entry{beacon("r1", h1, 3)},
		landed: map[string]int64{h1: 4},
		want:   map[string]string{h1: StatusUnknown},
	}, {
		name:   "alive: its counts are current",
		runs:   []audit.Run{run("r1", at(h1, 0), at(h3, 29), false)},
		counts: []audit.Entry{beacon("r1", h1, 3)},
		landed: map[string]int64{h1: 4},
		want:   map[string]string{h1: StatusMismatch},
	}} {
		t.Run(c.name, func(t *testing.T) {
			rows := audit.RowCounts{}
			for h, n := range c.landed {
				rows.Add(h, "shop", n)
			}
			counts := append([]audit.Entry(nil), c.counts...)
			for h, n := range c.landed { // the sink's dedup and dead letters: none
				counts = append(counts, sink("0", "clicks", "shop", h, 10, n, 0, 0))
			}
			lake := &Lake{Rows: map[string]audit.RowCounts{"clicks": rows}, Complete: complete}
			r := Reconcile(Input{Records: audit.Latest(counts), Runs: c.runs, Lake: lake, Since: since, Now: now})
			got := map[string]string{}
			for _, l := range r.Lines {
				got[l.Hour] = l.Status
				if l.Status == StatusUnknown && !strings.Contains(l.Problem, "r1") {
					t.Errorf("unknown line does not name the killed run: %s", l.Problem)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("lines %+v, want %v", r.Lines, c.want)
			}
			for h, w := range c.want {
				if got[h] != w {
					t.Errorf("hour %s: %s, want %s (%+v)", h, got[h], w, r.Lines)
				}
			}
		})
	}
}

// TestReconcileSinkLakes: topics are judged against the lake their sink
// announced; one landed elsewhere is named, one nothing lands is reported.
func TestReconcileSinkLakes(t *testing.T) {
	const h1 = "2026-12-02T03"
	since := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	runs := []audit.Run{
		{Role: audit.RoleSink, Instance: "g1", ID: "1", Topics: []string{"logs"}, Lake: "file:///lake"},
		{Role: audit.RoleSink, Instance: "g2", ID: "1", Topics: []string{"clicks"}, Lake: "s3://other"},
	}
	entries := []audit.Entry{
		agent(audit.RoleTail, "logs", "web:/a", h1, 2),
		agent(audit.RoleBeacon, "clicks", "shop", h1, 3),
		agent(audit.RoleIntake, "ops.metrics", "node", h1, 7),
	}
	in := Input{Records: audit.Latest(entries), Runs: runs, LakeURL: "file:///lake", Since: since}
	if got := in.Topics(); len(got) != 1 || got[0] != "logs" {
		t.Fatalf("topics judged against the lake %v, want [logs]", got)
	}
	in.Lake = &Lake{Rows: map[string]audit.RowCounts{"logs": {h1: {"web:/a": 2}}}, Complete: map[string]map[string]bool{"logs": {h1: true}}}
	r := Reconcile(in)
	if len(r.Lines) != 1 || r.Lines[0].Topic != "logs" || r.Lines[0].Status != StatusOK {
		t.Errorf("lines %+v, want logs ok only", r.Lines)
	}
	if len(r.NotLanded) != 1 || r.NotLanded[0] != (NotLanded{Topic: "ops.metrics", Accepted: 7}) || !r.Failed() {
		t.Errorf("not landed %+v, want ops.metrics with 7 accepted, and a failed report", r.NotLanded)
	}
	if len(r.Elsewhere) != 1 || r.Elsewhere["clicks"][0] != "s3://other" {
		t.Errorf("landed elsewhere %v, want clicks in s3://other", r.Elsewhere)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not landed: topic ops.metrics: agents accepted 7 events", "landed elsewhere: topic clicks lands in s3://other"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRowCountsRoundTrip(t *testing.T) {
	c := audit.RowCounts{}
	c.Add("2026-12-02T03", "web:/a", 3)
	c.Add("2026-12-02T03", "web:/a", 2)
	got, err := audit.DecodeRowCounts(audit.EncodeRowCounts(c))
	if err != nil || got["2026-12-02T03"]["web:/a"] != 5 {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{`[]`, `{"2026-12-02":{"a":1}}`, `{"2026-12-02T03":{"a":-1}}`} {
		if _, err := audit.DecodeRowCounts(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestReconcileOtherSource: sources an agent counted in (other) add up with
// it as a whole; a legitimate source counted on its own stays exact, and a
// loss in the hour still shows, on the source's own line when it has one.
func TestReconcileOtherSource(t *testing.T) {
	const h1 = "2026-12-02T03"
	since := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	lake := func(rows map[string]int64) *Lake {
		c := audit.RowCounts{}
		for src, n := range rows {
			c.Add(h1, src, n)
		}
		return &Lake{Rows: map[string]audit.RowCounts{"clicks": c}, Complete: map[string]map[string]bool{"clicks": {h1: true}}}
	}
	entries := []audit.Entry{
		agent(audit.RoleBeacon, "clicks", "shop", h1, 5),
		agent(audit.RoleBeacon, "clicks", "x1", h1, 1),
		agent(audit.RoleBeacon, "clicks", audit.OtherSource, h1, 4), // x2, x3, x4, x5
	}
	for name, c := range map[string]struct {
		rows  map[string]int64
		other string
	}{
		"exact":          {map[string]int64{"shop": 5, "x1": 1, "x2": 1, "x3": 1, "x4": 1, "x5": 1}, StatusOK},
		"a folded loss":  {map[string]int64{"shop": 5, "x1": 1, "x2": 1, "x3": 1, "x4": 1}, StatusMismatch},
		"shop loses one": {map[string]int64{"shop": 4, "x1": 1, "x2": 1, "x3": 1, "x4": 1, "x5": 1}, StatusMismatch},
	} {
		r := Reconcile(Input{Records: audit.Latest(entries), Lake: lake(c.rows), Since: since})
		// x2..x5 were never counted on their own: they are part of (other).
		if len(r.Lines) != 3 {
			t.Errorf("%s: lines %+v, want shop, x1 and (other)", name, r.Lines)
		}
		for _, l := range r.Lines {
			want := StatusOK
			switch {
			case l.Source == audit.OtherSource:
				want = c.other
			case l.Source == "shop" && name == "shop loses one":
				want = StatusMismatch
			case l.Source != "shop" && l.Source != "x1":
				want = c.other // folded sources share the hour's verdict
			}
			if l.Status != want {
				t.Errorf("%s: %s %s (%s), want %s", name, l.Source, l.Status, l.Problem, want)
			}
		}
	}
}
