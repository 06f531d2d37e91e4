package kafka

// Produce refusals: a partition of a Produce request answered with an
// error code is counted by that error (millrace_broker_produce_refused_total,
// label reason: Kafka's error name, a bounded set) and logged with who sent
// it (client ID, remote address, principal), where (topic, partition) and
// why (the error and its message). Without this, a producer whose records
// the broker refused, for a missing key on a compacted topic or a timestamp
// out of bounds, leaves nothing on the broker to find it by.
//
// Lines are rate-limited per reason, at most one per refusalLogInterval,
// carrying how many refusals of that reason went unlogged since the last
// one: a producer retrying a bad batch in a loop, or every producer of a
// partition that moved, must not flood the log, and one noisy reason must
// not hide another. Refusals the client retries on its own (the
// retriable errors: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, ...) are
// logged at Debug, the others, which lose the client's records, at Info.

import (
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refusalLog rate-limits the log lines about refused produces.
type refusalLog struct {
	mu       sync.Mutex // guards the following
	byReason map[int16]*refusalLine
}

// refusalLine is the state of one reason's lines.
type refusalLine struct {
	last     time.Time // when the last line was logged
	unlogged int       // refusals since then, not logged
}

// due records one refusal with code at now and reports whether to log it,
// with the number of refusals of that code not logged before it.
func (l *refusalLog) due(code int16, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byReason == nil {
		l.byReason = map[int16]*refusalLine{}
	}
	line := l.byReason[code]
	if line == nil {
		line = &refusalLine{}
		l.byReason[code] = line
	}
	if !line.last.IsZero() && now.Sub(line.last) < refusalLogInterval {
		line.unlogged++
		return false, 0
	}
	skipped := line.unlogged
	line.last, line.unlogged = now, 0
	return true, skipped
}

// produceRefused counts and (rate-limited) logs one partition of r that
// was answered with an error.
func (b *Broker) produceRefused(r *request, topic string, sp *kmsg.ProduceResponseTopicPartition) {
	reason := errorName(sp.ErrorCode)
	b.metrics.produceRefusal(reason)
	log, skipped := b.produceRefusals.due(sp.ErrorCode, time.Now())
	if !log {
		return
	}
	level := slog.LevelInfo
	if e, ok := kerr.ErrorForCode(sp.ErrorCode).(*kerr.Error); ok && e.Retriable {
		level = slog.LevelDebug
	}
	attrs := []any{"client_id", r.clientIDString(), "topic", topic, "partition", sp.Partition, "reason", reason}
	if r.conn != nil {
		attrs = append(attrs, "remote", r.conn.remote, "principal", r.conn.principal)
	}
	if sp.ErrorMessage != nil {
		attrs = append(attrs, "message", *sp.ErrorMessage)
	}
	if len(sp.ErrorRecords) > 0 {
		attrs = append(attrs, "records_refused", len(sp.ErrorRecords))
	}
	attrs = append(attrs, "refused_unlogged_since_last_line", skipped)
	b.logger.Log(b.ctx, level, "produce refused", attrs...)
}

// errorName is Kafka's name for an error code, as kerr spells it.
func errorName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return "UNKNOWN_SERVER_ERROR"
}
