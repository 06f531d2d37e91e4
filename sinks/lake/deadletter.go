package lake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DeadLetter is the JSON value of a record on `<topic>.dlq`.
type DeadLetter struct {
	// Reason says why the record was not landed (the schema's validation
	// error, or "empty record value").
	Reason string `json:"reason"`
	// Topic, Partition and Offset locate the original record; they identify
	// a dead letter sent twice after a crash.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Timestamp is the original record's timestamp, RFC 3339 UTC.
	Timestamp string `json:"timestamp"`
	// Value is the original value when it is valid UTF-8; otherwise
	// ValueBase64 holds it.
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// newDeadLetter builds the envelope for r.
func newDeadLetter(tp topicPartition, r *kgo.Record, reason string) DeadLetter {
	d := DeadLetter{Reason: reason, Topic: tp.topic, Partition: tp.partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
	if utf8.Valid(r.Value) {
		s := string(r.Value)
		d.Value = &s
	} else {
		d.ValueBase64 = base64.StdEncoding.EncodeToString(r.Value)
	}
	return d
}

// kgoDeadLetters produces dead letters with the worker's client (idempotent
// producer, acks from all in-sync replicas, kgo's defaults).
type kgoDeadLetters struct {
	client *kgo.Client

	mu  sync.Mutex // guards the following
	err error      // first failed produce since the last flush
}

func (d *kgoDeadLetters) send(tp topicPartition, r *kgo.Record, reason string) {
	value, _ := json.Marshal(newDeadLetter(tp, r, reason)) // plain strings and numbers: cannot fail
	d.client.Produce(context.Background(), &kgo.Record{Topic: tp.topic + ".dlq", Key: r.Key, Value: value},
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
