package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceTimestampBounds: a franz-go producer's record two hours in the
// future gets INVALID_TIMESTAMP under the default after.max (1 h), is
// accepted once the topic allows it, and the bounds are described like
// every other topic config.
func TestProduceTimestampBounds(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("ts-default", 1, nil)
	tb.createTopic("ts-wide", 1, map[string]string{"message.timestamp.after.max.ms": "86400000"})
	ctx := testContext(t)
	prod := newClient(t, tb.addr, kgo.RecordRetries(0))
	future := time.Now().Add(2 * time.Hour)

	err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ts-default", Value: []byte("x"), Timestamp: future}).FirstErr()
	if !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("2 h ahead, default bound: %v, want INVALID_TIMESTAMP", err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ts-wide", Value: []byte("x"), Timestamp: future}).FirstErr(); err != nil {
		t.Fatalf("2 h ahead, after.max 1 day: %v", err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ts-default", Value: []byte("x"), Timestamp: time.Unix(0, 0)}).FirstErr(); err != nil {
		t.Fatalf("1970, before.max unbounded by default: %v", err)
	}

	adm, _ := newAdmin(t, tb.addr)
	rcs, err := adm.DescribeTopicConfigs(ctx, "ts-default", "ts-wide")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"ts-default": {"message.timestamp.after.max.ms": "3600000", "message.timestamp.before.max.ms": "9223372036854775807", "millrace.max.decompressed.bytes": "67108864"},
		"ts-wide":    {"message.timestamp.after.max.ms": "86400000"},
	}
	for topic, configs := range want {
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
		}
		for name, value := range configs {
			if c := configOf(t, rc, name); c.MaybeValue() != value {
				t.Errorf("%s %s = %q, want %q", topic, name, c.MaybeValue(), value)
			}
		}
	}
}
