package lake

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/sinks/iceberg"
)

// Where dead letters go (doc.go, "Dead letters"): with Format hive to the
// `<topic>.dlq` topic as a JSON DeadLetter, produced at once and
// acknowledged before the window's commit; with Format iceberg to the
// topic's dead-letter table (`<topic>~dlq`) as a row, kept with the window
// and committed with it, before the topic's table (tabledeadletter.go).
// Iceberg mode writes no `<topic>.dlq` topic: the table is the one place a
// user looks, as with Redpanda's Iceberg topics.

// maxWindowDeadLetterBytes bounds the dead letters a window of Format
// iceberg holds in memory (landerLimits.deadLetterBytes): one that reaches
// it lands. A cut that depends on the records only, like roll-rows.
const maxWindowDeadLetterBytes = 16 << 20

// deadLetterRowOverhead is what a dead-letter row holds besides its value
// and reason (topic, offsets, time), as counted for that bound.
const deadLetterRowOverhead = 64

// sendDeadLetter sends record r of p, which the table or schema cannot
// take for reason, to the dead-letter topic or to win's dead-letter rows.
func (w *Worker) sendDeadLetter(p *partitionState, win *window, r *kgo.Record, reason string) {
	if w.cfg.Format != FormatIceberg {
		w.dlq.send(newDeadLetter(p.tp, r, reason), deadLetterKey(r))
		return
	}
	// The value whole (a table holds binary of any size), copied: the
	// window outlives the fetch that delivered it.
	win.deadLetterRows = append(win.deadLetterRows, iceberg.DeadLetterRow{Topic: p.tp.topic, Partition: p.tp.partition,
		Offset: r.Offset, LastOffset: -1, Raw: bytes.Clone(r.Value), Reason: reason, Time: r.Timestamp.UTC()})
}

// sendBatchDeadLetter sends d, the dead letter of a skipped batch of p, to
// the dead-letter topic or to the rows of p's window (which holds the
// skipped offsets: call it after lander.skipped).
func (w *Worker) sendBatchDeadLetter(p *partitionState, d DeadLetter) {
	if w.cfg.Format != FormatIceberg {
		w.dlq.send(d, nil)
		return
	}
	reason := d.Reason
	if d.Error != "" {
		reason += ": " + d.Error
	}
	row := iceberg.DeadLetterRow{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset, LastOffset: d.LastOffset, Reason: reason}
	if t, err := time.Parse(time.RFC3339Nano, d.Timestamp); err == nil {
		row.Time = t // unset when the batch's header could not be read
	}
	win := p.windowOf(w.core.window(p.tp))
	win.deadLetterRows = append(win.deadLetterRows, row)
}

// DeadLetter is the JSON value of a record on `<topic>.dlq`.
type DeadLetter struct {
	// Reason says why the record was not landed (the schema's validation
	// error, or "empty record value"), or is "undecodable batch" when the
	// dead letter stands for a whole batch whose records could not be
	// decompressed (see Error), or "malformed batch" for a whole batch
	// whose records are malformed or fewer than it claims.
	Reason string `json:"reason"`
	// Topic, Partition and Offset locate the original record (for a batch:
	// the first offset skipped, its first offset unless records of a
	// malformed batch before its first bad one were landed); they identify
	// a dead letter sent twice after a crash.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// LastOffset is an undecodable batch's last offset: the sink skipped
	// Offset through LastOffset. Absent for a single record.
	LastOffset int64 `json:"last_offset,omitempty"`
	// Error says why an undecodable batch could not be read: the codec's
	// error, or that it decompresses past MaxDecompressedBatchBytes.
	Error string `json:"error,omitempty"`
	// BatchBytes, Compression and Records describe an undecodable batch
	// from its header: its size on disk, its codec, and the record count
	// it claims. Absent when the batch could not be read again.
	BatchBytes  int    `json:"batch_bytes,omitempty"`
	Compression string `json:"compression,omitempty"`
	Records     int32  `json:"records,omitempty"`
	// Timestamp is the original record's timestamp (for a batch, its
	// header's first timestamp, when read), RFC 3339 UTC.
	Timestamp string `json:"timestamp"`
	// Value is the original value when it is valid UTF-8; otherwise
	// ValueBase64 holds it.
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
	// ValueBytes is the original value's length. A value longer than
	// maxDeadLetterValue is cut to its first maxDeadLetterValue bytes (at a
	// character boundary when it is UTF-8) and Truncated is set; the whole
	// record stays in its topic at Offset.
	ValueBytes int  `json:"value_bytes"`
	Truncated  bool `json:"truncated,omitempty"`
}

// maxDeadLetterValue bounds the value (and key) a dead letter carries. A
// record the broker took can be refused as a dead letter: escaping (up to 6
// bytes per byte) or base64 grows it past the producer's batch limit
// (franz-go's default 1,000,012 bytes) or the topic's max.message.bytes, the
// window could never be committed, and its worker would stop on the same
// record again and again. 128 KiB stays within 1 MB in the worst case.
const maxDeadLetterValue = 128 << 10

// newDeadLetter builds the envelope for r.
func newDeadLetter(tp topicPartition, r *kgo.Record, reason string) DeadLetter {
	d := DeadLetter{Reason: reason, Topic: tp.topic, Partition: tp.partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano), ValueBytes: len(r.Value)}
	v := r.Value
	if len(v) > maxDeadLetterValue {
		cut := maxDeadLetterValue
		if utf8.Valid(v) {
			for !utf8.RuneStart(v[cut]) { // not inside a character: the cut stays text
				cut--
			}
		}
		v, d.Truncated = v[:cut], true
	}
	if utf8.Valid(v) {
		s := string(v)
		d.Value = &s
	} else {
		d.ValueBase64 = base64.StdEncoding.EncodeToString(v)
	}
	return d
}

// deadLetterKey is the key a dead letter of r carries: r's own, unless it is
// longer than maxDeadLetterValue (the envelope locates the record anyway).
func deadLetterKey(r *kgo.Record) []byte {
	if len(r.Key) > maxDeadLetterValue {
		return nil
	}
	return r.Key
}

// kgoDeadLetters produces dead letters with the worker's client (idempotent
// producer, acks from all in-sync replicas, kgo's defaults).
type kgoDeadLetters struct {
	client *kgo.Client

	mu  sync.Mutex // guards the following
	err error      // first failed produce since the last flush
}

func (d *kgoDeadLetters) send(letter DeadLetter, key []byte) {
	value, _ := json.Marshal(letter) // plain strings and numbers: cannot fail
	d.client.Produce(context.Background(), &kgo.Record{Topic: letter.Topic + ".dlq", Key: key, Value: value},
		func(_ *kgo.Record, err error) {
			if err != nil {
				d.mu.Lock()
				if d.err == nil {
					d.err = err
				}
				d.mu.Unlock()
			}
		})
}

func (d *kgoDeadLetters) flush(ctx context.Context) error {
	if err := d.client.Flush(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	d.err = nil
	return err
}
