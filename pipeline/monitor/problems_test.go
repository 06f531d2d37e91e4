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
	missing := map[string]string{"topic": "applogs", "cause": "topic_missing", "message": `topic applogs does not exist: run "millrace topic create applogs"`}
	denied := map[string]string{"topic": "clicks", "cause": "topic_denied", "message": "not authorized"}
	sample := func(name string, v float64, labels map[string]string, ts time.Time, source string) metricSample {
		return metricSample{Name: name, Kind: "gauge", Value: v, Labels: labels, TS: ts, Source: source}
	}
	p := newProblemSet(10)
	p.add(sample("millrace_ship_buffered_records", 5, nil, at(0), "h:up"))
	p.add(sample(problemMetric, 1, missing, at(0), "h:up"))
	p.add(sample(problemMetric, 1, denied, at(0), "h:beacon"))
	got := p.current(at(5), time.Minute)
	if len(got) != 2 || got[1].Source != "h:up" || got[1].Topic != "applogs" || got[1].Cause != "topic_missing" ||
		got[1].Message != `topic applogs does not exist: run "millrace topic create applogs"` || !got[1].LastSeen.Equal(at(0)) {
		t.Fatalf("current: %+v", got)
	}
	p.add(sample(problemMetric, 0, missing, at(10), "h:up"))
	p.add(sample(problemMetric, 1, missing, at(5), "h:up")) // older, read late
	if got := p.current(at(11), time.Minute); len(got) != 1 || got[0].Topic != "clicks" {
		t.Fatalf("after the topic's records shipped again: %+v", got)
	}
	if got := p.current(at(61), time.Minute); len(got) != 0 {
		t.Fatalf("a source silent past staleAfter still reports: %+v", got)
	}
}

// Only problem samples are decoded: the ops topic's other values are
// skipped before any JSON is parsed.
func TestProblemSetTakesProblemSamplesOnly(t *testing.T) {
	ts := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := newProblemSet(10)
	for _, v := range [][]byte{
		sampleJSON("millrace_tail_lines_read_total", "counter", 5, `{}`, ts, "h:up"),
		sampleJSON(problemMetric, "gauge", 1, `{"topic":"a","cause":"topic_missing","message":"m"}`, ts, "h:up"),
	} {
		samples, ok := decodeOps(v)
		if !ok {
			t.Fatalf("undecodable sample %s", v)
		}
		for _, s := range samples {
			p.add(s)
		}
	}
	got := p.current(ts, 0)
	if len(got) != 1 || got[0].Topic != "a" || got[0].Source != "h:up" || got[0].Message != "m" {
		t.Fatalf("problems %+v, want the one problem sample", got)
	}
}
