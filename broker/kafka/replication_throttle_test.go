package kafka

import (
	"crypto/rand"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestByteRate: a leader.replication.throttled.rate of 1000 bytes per
// second lets a second's worth through, is exceeded once a response
// overdraws it, and refills at the rate.
func TestByteRate(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	r := newByteRate(1000)
	if !r.bounded() || r.Exceeded(t0) {
		t.Fatalf("a fresh rate must allow a second's worth")
	}
	r.Record(1500, t0) // a response is recorded after it is read
	if !r.Exceeded(t0.Add(400 * time.Millisecond)) {
		t.Errorf("500 bytes overdrawn, 400 refilled: want exceeded")
	}
	if r.Exceeded(t0.Add(600 * time.Millisecond)) {
		t.Errorf("500 bytes overdrawn, 600 refilled: want allowed")
	}
	r.Record(100, t0.Add(10*time.Second))
	if r.tokens != 900 {
		t.Errorf("an idle rate refills to one second's worth only: %v tokens after 100 bytes, want 900", r.tokens)
	}
	unbounded := newByteRate(math.MaxInt64)
	if unbounded.bounded() {
		t.Errorf("Kafka's default rate (Long.MaxValue) must bound nothing")
	}
	// A dynamic change: from unbounded to 1000 bytes per second, the
	// bucket holds one second's worth of the new rate, not of the old.
	unbounded.Record(5000, t0)
	unbounded.set(1000)
	unbounded.Record(1500, t0)
	if !unbounded.Exceeded(t0.Add(400 * time.Millisecond)) {
		t.Errorf("after a change to 1000 bytes/s, 1500 bytes must overdraw the bucket")
	}
}

// TestReplicationRatesAtRuntime: leader.replication.throttled.rate and
// follower.replication.throttled.rate are dynamic broker configs, as in
// Kafka (DynamicConfig.Broker; kafka-reassign-partitions.sh --throttle sets
// them per broker): set through kadm for this broker or cluster-wide they
// apply at once, DescribeConfigs reports them changeable with their
// layers, a negative rate gets INVALID_REQUEST, and removing them brings
// back the properties file's value.
func TestReplicationRatesAtRuntime(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.LeaderReplicationThrottledRate = 5000 }))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	const leader, follower = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
	alter := func(configs []kadm.AlterConfig, ids ...int32) error {
		t.Helper()
		resp, err := adm.AlterBrokerConfigs(ctx, configs, ids...)
		if err != nil || len(resp) != 1 {
			t.Fatalf("alter brokers %v: %v %+v", ids, err, resp)
		}
		return resp[0].Err
	}
	set := func(name, value string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
	}
	rates := func() (float64, float64) {
		return tb.broker.leaderReplication.perSecond(), tb.broker.followerReplication.perSecond()
	}
	if l, f := rates(); l != 5000 || f != math.MaxInt64 {
		t.Fatalf("at start: leader %v, follower %v; want the properties file's 5000 and unbounded", l, f)
	}
	if err := alter([]kadm.AlterConfig{set(leader, "1000")}, 0); err != nil {
		t.Fatal(err)
	}
	if err := alter([]kadm.AlterConfig{set(follower, "2000")}); err != nil {
		t.Fatal(err)
	}
	if l, f := rates(); l != 1000 || f != 2000 {
		t.Fatalf("after the alters: leader %v, follower %v; want 1000 (broker 0's) and 2000 (cluster-wide)", l, f)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe broker 0: %v %+v", err, rcs)
	}
	c := configOf(t, rcs[0], leader)
	if c.Value == nil || *c.Value != "1000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("broker 0 describes %s as %+v, want 1000 from DYNAMIC_BROKER_CONFIG", leader, c)
	}
	if len(c.Synonyms) != 2 || c.Synonyms[1].Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("%s's synonyms are %+v, want the dynamic value over the properties file's", leader, c.Synonyms)
	}
	if err := alter([]kadm.AlterConfig{set(leader, "-1")}, 0); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("a negative rate: %v, want INVALID_REQUEST", err)
	}
	if err := alter([]kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leader}}, 0); err != nil {
		t.Fatal(err)
	}
	if l, _ := rates(); l != 5000 {
		t.Fatalf("with broker 0's dynamic value removed, leader %v; want the properties file's 5000", l)
	}
}

// TestLeaderThrottleBoundsResponse: a follower out of the ISR of a
// throttled replica gets at most what leader.replication.throttled.rate
// has left, a batch at least, not the whole of its fetch's max bytes
// (Kafka overdraws by one replica.fetch.max.bytes, 1 MiB; a follower here
// asks for 8 MiB); once the rate is spent it gets nothing.
func TestLeaderThrottleBoundsResponse(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, withConfig(func(c *Config) { c.LeaderReplicationThrottledRate = 1000 }))
	tb.createTopic("moving", 1, map[string]string{"leader.replication.throttled.replicas": "*"})
	_, cl := newAdmin(t, tb.addr)
	value := make([]byte, 400)
	for range 4 {
		rand.Read(value) // incompressible
		if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: "moving", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	follower := dial(t, tb.addr)
	fetch := func(offset int64, correlationID int32) (batches int, bytes int, next int64) {
		t.Helper()
		req := fetchRequest(11, 0, 0, 8<<20, fetchPart{topic: "moving", offset: offset, maxBytes: 8 << 20})
		req.ReplicaID = 1
		follower.sendAs("replica", req, correlationID)
		resp := follower.readResponse(req, correlationID).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("follower fetch: error %d", p.ErrorCode)
		}
		raw := p.RecordBatches
		next = offset
		for len(raw) >= 61 {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			n := 12 + int(b.Length)
			raw, batches, bytes = raw[n:], batches+1, bytes+n
			next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		}
		return batches, bytes, next
	}
	// The four batches are about 1.9 kB. Fetching until an answer is
	// empty, the follower gets the 1000 bytes and one batch of overdraw,
	// not all four (the rate refills 1 byte per ms meanwhile).
	var total, largest int
	var next int64
	for id := int32(1); next < 4; id++ {
		batches, bytes, after := fetch(next, id)
		if batches == 0 {
			break
		}
		total, largest, next = total+bytes, max(largest, bytes/batches), after
	}
	if next == 4 || total == 0 || total > 1000+largest {
		t.Fatalf("the follower got %d bytes (offsets 0 to %d) before an empty answer, want 1000 and a batch at most", total, next)
	}
}
