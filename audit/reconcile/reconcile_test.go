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
	r := Reconcile(audit.Latest(entries), lake, "", since)
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
	if r := Reconcile(audit.Latest(entries), lake, "clicks", since); r.Unreconciled != 0 || len(r.Lines) != 1 {
		t.Errorf("clicks only: %+v", r)
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
