package monitor

import (
	"testing"
	"time"
)

// A problem shows while its latest sample says 1 and is fresh; a later 0
// (the topic's records ship again) or silence past staleAfter ends it; an
// older sample read after a newer one (interleaved partitions) changes
// nothing.
func TestProblemSet(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	missing := `{"topic":"applogs","cause":"topic_missing","message":"topic applogs does not exist: run \"millrace topic create applogs\""}`
	denied := `{"topic":"clicks","cause":"topic_denied","message":"not authorized"}`
	p := newProblemSet(10)
	p.add(sampleJSON("millrace_tail_lines_read_total", "counter", 5, `{}`, at(0), "h:up"))
	p.add(sampleJSON(problemMetric, "gauge", 1, missing, at(0), "h:up"))
	p.add(sampleJSON(problemMetric, "gauge", 1, denied, at(0), "h:beacon"))
	got := p.current(at(5), time.Minute)
	if len(got) != 2 || got[1].Source != "h:up" || got[1].Topic != "applogs" || got[1].Cause != "topic_missing" ||
		got[1].Message != `topic applogs does not exist: run "millrace topic create applogs"` || !got[1].LastSeen.Equal(at(0)) {
		t.Fatalf("current: %+v", got)
	}
	p.add(sampleJSON(problemMetric, "gauge", 0, missing, at(10), "h:up"))
	p.add(sampleJSON(problemMetric, "gauge", 1, missing, at(5), "h:up")) // older, read late
	if got := p.current(at(11), time.Minute); len(got) != 1 || got[0].Topic != "clicks" {
		t.Fatalf("after the topic's records shipped again: %+v", got)
	}
	if got := p.current(at(61), time.Minute); len(got) != 0 {
		t.Fatalf("a source silent past staleAfter still reports: %+v", got)
	}
}
