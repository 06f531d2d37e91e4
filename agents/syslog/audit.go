package syslog

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
)

// The receiver's audit counts every record the broker acknowledged, when
// the acknowledgement arrives, under the source key of its host and app
// (audit.SyslogSource: "host/app", or "-" for a malformed message that has
// neither) and the hour of received_at (the record's timestamp): a
// sender's own timestamp may be missing, or years off on a device without
// a clock, and an hour the sink cannot find from the record would never
// reconcile. Sources are bounded by audit.max_keys: a flood of made-up
// hosts is counted in "(other)". Counts live in memory, as the beacon's, so
// the counter is made not distinct (each process run counts under a run of
// its own, which the reconciler adds up): those acknowledged since the
// last publication are lost if the process is killed; a clean shutdown of
// the counter publishes them.

// SetAudit makes the receiver count acknowledged records in c (nil: no
// audit). Call it before Start.
func (s *Server) SetAudit(c *audit.Counter) { s.audit = c }

// counted is the acknowledgement of a produced record of source (its
// audit key): the receiver's metrics, and the audit when it is on.
func (s *Server) counted(rec *kgo.Record, source string, err error) {
	if err != nil {
		s.metrics.produceErrors.Inc()
		return
	}
	s.metrics.produced.Inc()
	if s.audit != nil {
		s.audit.Add(rec.Topic, source, rec.Timestamp, 1)
	}
}
