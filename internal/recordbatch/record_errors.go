package recordbatch

// Per-record errors (KIP-467): a produced batch refused for what some of
// its records hold, rather than for its framing, names each such record,
// so the Produce response can carry Kafka's record_errors (batch index and
// message) and a client fails those records and sends the others again.
// Kafka's LogValidator does the same: it walks the whole batch, collects
// every record's error, and refuses the batch with INVALID_TIMESTAMP if any
// of them is about a timestamp, INVALID_RECORD otherwise.

import (
	"fmt"
	"strings"
)

// maxRecordErrors bounds the records a Error lists. Kafka lists them
// all, but a compressed batch may hold millions of 7-byte records, and a
// message for each would cost the broker memory and the response bytes
// out of any proportion to the batch. A client fails the records past the
// bound all the same (librdkafka and the Java client fail every record of
// a refused batch; the listed ones with their own message).
const maxRecordErrors = 1000

// RecordError is one record a produced batch was refused for.
type RecordError struct {
	// Index is the record's position among the records of the batches
	// validated together, from 0: Kafka's batch_index, since a produce
	// carries one batch per partition.
	Index int
	// Message says what is wrong with the record.
	Message string
}

// recordFaults collects the refused records of one batch's walk; its zero
// value is empty, so a walk that refuses nothing allocates nothing.
type recordFaults struct {
	errors    []RecordError
	total     int  // records refused, listed or not
	timestamp bool // some record's timestamp is out of bounds
}

// add records why record i was refused; the walk calls it only for a
// record that breaks at least one of rules.
func (f *recordFaults) add(i int, offsetDelta, keyLength, ts int64, rules *Rules) {
	f.total++
	var msg string
	switch {
	case offsetDelta != int64(i):
		msg = fmt.Sprintf("offset delta %d; a produced batch numbers its records from 0", offsetDelta)
	case rules.RequireKeys && keyLength < 0:
		msg = "no key; a compacted topic (cleanup.policy=compact) accepts only keyed records"
	case rules.RequireKeys && keyLength > rules.MaxKeyBytes:
		msg = fmt.Sprintf("a key of %d bytes; a compacted topic accepts keys of at most millrace.compacted.max.key.bytes (%d)", keyLength, rules.MaxKeyBytes)
	default:
		f.timestamp = true
		msg = fmt.Sprintf("timestamp %d is outside [%d, %d] (message.timestamp.before.max.ms, message.timestamp.after.max.ms)", ts, rules.MinTimestamp, rules.MaxTimestamp)
	}
	if len(f.errors) < maxRecordErrors {
		f.errors = append(f.errors, RecordError{Index: i, Message: msg})
	}
}

// batchError is the refusal of the batch: INVALID_TIMESTAMP if a timestamp
// is among the reasons, as Kafka's processRecordErrors decides, and a
// reason that counts the records and quotes the first three.
func (f *recordFaults) batchError() *Error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d record(s) refused", f.total)
	if f.total > len(f.errors) {
		fmt.Fprintf(&b, " (the first %d listed)", len(f.errors))
	}
	for i, e := range f.errors[:min(3, len(f.errors))] {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%srecord %d: %s", sep, e.Index, e.Message)
	}
	err := ErrInvalidRecord
	if f.timestamp {
		err = ErrInvalidTimestamp
	}
	return &Error{Reason: b.String(), Err: err, Records: f.errors}
}
