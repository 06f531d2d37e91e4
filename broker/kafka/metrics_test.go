package kafka

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/cluster"
	"millrace/broker/log"
)

// TestCountPartitions checks the partition gauges' arithmetic; only the
// controller passes the live brokers, so only it counts offline partitions.
func TestCountPartitions(t *testing.T) {
	state := func(leader int32, replicas, isr []int32) *cluster.PartitionState {
		return &cluster.PartitionState{Leader: leader, Replicas: replicas, ISR: isr}
	}
	topics := []*cluster.Topic{
		{Name: "a", Partitions: []*cluster.PartitionState{
			state(1, []int32{1, 2, 3}, []int32{1, 2, 3}), // led, fully replicated
			state(1, []int32{1, 2, 3}, []int32{1, 3}),    // led, under-replicated
			state(2, []int32{2, 1}, []int32{2}),          // followed
		}},
		{Name: "b", Partitions: []*cluster.PartitionState{
			state(-1, []int32{3}, []int32{3}),   // no leader
			state(3, []int32{3, 2}, []int32{3}), // leader dead
			state(2, []int32{2, 3}, []int32{2}), // elsewhere
		}},
	}
	for _, topic := range topics {
		for i, p := range topic.Partitions {
			p.Partition = int32(i)
		}
	}
	for _, tc := range []struct {
		name     string
		me       int32
		alive    map[int32]bool
		refusing map[log.TopicPartition]bool
		want     partitionCounts
	}{
		{"broker 1, not the controller", 1, nil, nil, partitionCounts{hosted: 3, leaders: 2, underReplicated: 1}},
		{"broker 2, the controller", 2, map[int32]bool{1: true, 2: true}, nil, partitionCounts{hosted: 5, leaders: 2, underReplicated: 2, offline: 2}},
		{"a broker hosting nothing", 9, nil, nil, partitionCounts{}},
		// A log that refuses appends counts where its broker leads it,
		// and not twice on the controller.
		{"broker 1 with a refusing log it leads and one it follows", 1, nil,
			map[log.TopicPartition]bool{{Topic: "a", Partition: 1}: true, {Topic: "a", Partition: 2}: true},
			partitionCounts{hosted: 3, leaders: 2, underReplicated: 1, offline: 1}},
		{"the controller with a refusing log of a leaderless partition", 2, map[int32]bool{1: true, 2: true},
			map[log.TopicPartition]bool{{Topic: "b", Partition: 0}: true, {Topic: "b", Partition: 2}: true},
			partitionCounts{hosted: 5, leaders: 2, underReplicated: 2, offline: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := countPartitions(topics, tc.me, tc.alive, tc.refusing); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDiskCollector: the log size per topic is the sum of the partition
// logs this broker holds, and the volume gauges are reported.
func TestDiskCollector(t *testing.T) {
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "sized"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sized", Value: make([]byte, 500)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var want int64
	for p := int32(0); p < 2; p++ {
		l, _ := tb.logs.Get("sized", p)
		want += l.Size()
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newDiskCollector(tb.logs))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue()
		}
	}
	if got["millrace_broker_log_size_bytes{topic=sized}"] != float64(want) || want < 20*500 {
		t.Errorf("log size of sized: %v, want the logs' %d bytes", got["millrace_broker_log_size_bytes{topic=sized}"], want)
	}
	if u, total := got["millrace_broker_log_dir_usable_bytes"], got["millrace_broker_log_dir_total_bytes"]; u <= 0 || total < u {
		t.Errorf("volume gauges: usable %v, total %v", u, total)
	}
}

// TestProducedTopicLabelsSurviveFrameReuse produces with Produce v7, as
// librdkafka and kafka-python do, where the topic name is a string inside
// the request frame. Two frames of one size class on one connection reuse
// one pooled buffer (framepool.go), so a label that aliased the first frame
// would read the second topic's name: the registry then holds two series
// with the same labels and Gather fails ("collected before").
func TestProducedTopicLabelsSurviveFrameReuse(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	tb := startBroker(t, withMetrics(reg))
	topics := []string{"labels-first", "labels-other"} // same length: same frame size
	for _, topic := range topics {
		tb.createTopic(topic, 1, nil)
	}
	c := dial(t, tb.addr)
	value := strings.Repeat("v", 2*frameClassMin) // a frame big enough to be pooled
	for i, topic := range topics {
		if sp := c.produceRaw(7, topic, 0, 1, makeBatch(t, plainBatch(value)), int32(i)); sp.ErrorCode != 0 {
			t.Fatalf("produce to %s: error %d", topic, sp.ErrorCode)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "millrace_broker_produced_records_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" {
					got = append(got, l.GetValue())
				}
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, topics) {
		t.Fatalf("produced_records_total topic labels %q, want %q", got, topics)
	}
}
