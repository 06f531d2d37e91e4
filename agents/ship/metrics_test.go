package ship

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRecordsSentByTopic: millrace_ship_records_sent_total counts each
// acknowledged record once, under its topic, even when the broker refused
// its first send and kgo sent it again; records of another topic (an
// agent's audit counts) are counted apart, so the data topic's count
// matches what the broker holds.
func TestRecordsSentByTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "data", "_audit"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// The first Produce is answered NOT_LEADER_OR_FOLLOWER for every
	// partition: the client sends the same batches again.
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		produce := req.(*kmsg.ProduceRequest)
		resp := produce.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range produce.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
				refused.Add(1)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	reg := prometheus.NewRegistry()
	s := startShipper(t, c, Config{Linger: 50 * time.Millisecond}, reg)
	var wg sync.WaitGroup
	var failures atomic.Int32
	p := s.Wrap(func(_ *kgo.Record, err error) {
		if err != nil {
			failures.Add(1)
		}
		wg.Done()
	})
	for i, topic := range []string{"data", "data", "data", "data", "data", "_audit", "_audit"} {
		wg.Add(1)
		s.ProduceWrapped(context.Background(), &kgo.Record{Topic: topic, Value: []byte{byte('a' + i)}}, p)
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if failures.Load() > 0 || refused.Load() == 0 {
		t.Fatalf("%d records failed; %d partitions refused", failures.Load(), refused.Load())
	}
	for topic, want := range map[string]float64{"data": 5, "_audit": 2} {
		if got := testutil.ToFloat64(s.metrics.records.WithLabelValues(topic)); got != want {
			t.Errorf("records sent to %s: %v, want %v", topic, got, want)
		}
		if got := testutil.ToFloat64(s.metrics.bytes.WithLabelValues(topic)); got != want {
			t.Errorf("bytes sent to %s: %v, want %v (one value byte each)", topic, got, want)
		}
	}
	if got := countRecords(t, c, "data"); got != 5 {
		t.Errorf("the broker holds %d records of data, want 5", got)
	}
}
