package beacon

import (
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
	"millrace/schemas"
)

// The beacon's audit counts every event the broker acknowledged for its
// topic, by source key and hour, when the acknowledgement arrives (not when
// the request is answered: a request that timed out with a 503 may still be
// acknowledged, and its events land). A browser's retry of such a request
// is acknowledged and counted again, so the counts are not distinct; the
// sink's deduplicated count makes up the difference. The beacon keeps no
// state on disk: counts acknowledged since the last publication (at most
// audit.interval) are lost if the process is killed; a clean shutdown
// publishes them.

// SetAudit makes the beacon count acknowledged clicks in clicks and
// acknowledged metric samples (POST /v1/metrics and remote write) in
// metrics; either may be nil. Call it before Start.
func (s *Server) SetAudit(clicks, metrics *audit.Counter) {
	s.clickAudit, s.metricAudit = clicks, metrics
	if s.remoteWrite != nil {
		s.remoteWrite.SetAudit(metrics)
		// The same limit on new sources per client as /v1/metrics.
		s.remoteWrite.SetNewSourceGate(func(r *http.Request) func() bool { return s.newSourceGate(s.info(r)) })
	}
}

// auditMark is what the audit counts for one record once the broker
// acknowledged it. A zero mark (no counter) counts nothing: dead letters.
type auditMark struct {
	counter *audit.Counter
	topic   string
	source  string
	at      time.Time // the event's time; zero: the record's timestamp
	// newSource says whether the request's client may open a new source
	// (audit.Counter.AddFrom); nil: always.
	newSource func() bool
}

// newSourceGate is the newSource of a request's marks: one token of the
// client's new-source bucket per new source, or nil when not limited.
func (s *Server) newSourceGate(info reqInfo) func() bool {
	if s.newSources == nil {
		return nil
	}
	return func() bool {
		ok, _ := s.newSources.allow(info.addr)
		return ok
	}
}

// clickMark is the mark of a valid click in row: its url's host and its
// (clamped) ts. A click without ts is bucketed by its record's timestamp,
// as the sink does.
func (s *Server) clickMark(row *schemas.Row, newSource func() bool) auditMark {
	if s.clickAudit == nil {
		return auditMark{}
	}
	u, _ := row.Get("url").(string)
	ts, _ := row.Get("ts").(time.Time)
	return auditMark{counter: s.clickAudit, topic: s.cfg.Topic, source: audit.ClickSource(u), at: ts, newSource: newSource}
}

// metricMark is the mark of a valid metric sample.
func (s *Server) metricMark(source string, ts time.Time, newSource func() bool) auditMark {
	if s.metricAudit == nil {
		return auditMark{}
	}
	return auditMark{counter: s.metricAudit, topic: s.cfg.MetricsTopic, source: audit.MetricSource(source), at: ts, newSource: newSource}
}

// counted is the acknowledgement that counts the mark once the broker
// acknowledged the record; nil when nothing is counted.
func (m auditMark) counted() ship.AckFunc {
	if m.counter == nil {
		return nil
	}
	return func(r *kgo.Record, err error) {
		if err == nil {
			at := m.at
			if at.IsZero() {
				at = r.Timestamp
			}
			m.counter.AddFrom(m.topic, m.source, at, 1, m.newSource)
		}
	}
}
