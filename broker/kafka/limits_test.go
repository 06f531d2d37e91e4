package kafka

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
)

// TestPartitionLimitsOnTheWire sends partition counts a hostile client
// would: each is refused with its Kafka error, and nothing is created.
func TestPartitionLimitsOnTheWire(t *testing.T) {
	tb := startBroker(t)
	_, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)

	createTopics := func(validateOnly bool, counts map[string]int32, order ...string) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.ValidateOnly = validateOnly
		for _, name := range order {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, counts[name], 1
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int16{}
		for _, st := range resp.Topics {
			got[st.Topic] = st.ErrorCode
			if st.ErrorCode != 0 && (st.ErrorMessage == nil || *st.ErrorMessage == "") {
				t.Errorf("%s: error %d without a message naming the limit", st.Topic, st.ErrorCode)
			}
		}
		return got
	}
	for _, validateOnly := range []bool{true, false} {
		got := createTopics(validateOnly, map[string]int32{"huge": math.MaxInt32}, "huge")
		if got["huge"] != kerr.InvalidPartitions.Code {
			t.Fatalf("validate_only=%v: MaxInt32 partitions got %d, want INVALID_PARTITIONS", validateOnly, got["huge"])
		}
	}
	// Two topics within the per-topic limit that together exceed the
	// per-request one: the first passes, the second is refused.
	got := createTopics(true, map[string]int32{"a": 6000, "b": 6000, "c": 1}, "a", "b", "c")
	if got["a"] != 0 || got["b"] != kerr.PolicyViolation.Code || got["c"] != 0 {
		t.Fatalf("per-request limit: %v, want a=0 b=POLICY_VIOLATION c=0", got)
	}
	if got := createTopics(false, map[string]int32{"small": 1, "other": 1}, "small", "other"); got["small"] != 0 || got["other"] != 0 {
		t.Fatalf("creating small topics: %v", got)
	}

	createPartitions := func(counts map[string]int32, order ...string) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = true
		for _, name := range order {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = name, counts[name]
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int16{}
		for _, st := range resp.Topics {
			got[st.Topic] = st.ErrorCode
		}
		return got
	}
	if got := createPartitions(map[string]int32{"small": math.MaxInt32}, "small"); got["small"] != kerr.InvalidPartitions.Code {
		t.Fatalf("growing to MaxInt32: %v, want INVALID_PARTITIONS", got)
	}
	if got := createPartitions(map[string]int32{"small": 6001, "other": 6001}, "small", "other"); got["small"] != 0 || got["other"] != kerr.PolicyViolation.Code {
		t.Fatalf("per-request limit on growth: %v, want small=0 other=POLICY_VIOLATION", got)
	}
	for _, name := range []string{"huge", "a", "b", "c"} {
		if _, ok := tb.cluster.Topic(name); ok {
			t.Errorf("topic %s exists after a refused or validate-only creation", name)
		}
	}
	if topic, _ := tb.cluster.Topic("small"); len(topic.Partitions) != 1 {
		t.Fatalf("small has %d partitions after validate-only growth", len(topic.Partitions))
	}
}

// TestMetadataAutoCreateIsBounded names more new topics in one Metadata
// request than millrace.max.partitions.per.request allows: only as many
// are created as fit, the rest are unknown.
func TestMetadataAutoCreateIsBounded(t *testing.T) {
	tb := startBroker(t,
		withConfig(func(c *Config) { c.NumPartitions = 2 }),
		withClusterConfig(func(c *cluster.Config) { c.MaxPartitionsPerRequest = 5 }))
	_, cl := newAdmin(t, tb.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, name := range []string{"m1", "m2", "m3", "m4"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, mt := range resp.Topics {
		switch mt.ErrorCode {
		case kerr.LeaderNotAvailable.Code: // created by this request, as in Kafka
			created = append(created, *mt.Topic)
		case kerr.UnknownTopicOrPartition.Code:
		default:
			t.Errorf("%s: error %d", *mt.Topic, mt.ErrorCode)
		}
	}
	if len(created) != 2 || len(tb.cluster.Topics()) != 2 {
		t.Fatalf("created %v (cluster holds %d topics), want 2 topics of 2 partitions within a budget of 5", created, len(tb.cluster.Topics()))
	}
}
