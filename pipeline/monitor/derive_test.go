package monitor

import (
	"math"
	"testing"
	"time"
)

func TestPartitionLag(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		committed, start, end int64
		want                  int64
	}{
		{"behind", 10, 0, 25, 15},
		{"caught up", 25, 0, 25, 0},
		{"never committed counts from the log start", -1, 5, 25, 20},
		{"never committed on an empty log", -1, 0, 0, 0},
		{"commit below the log start counts what is still there", 3, 10, 25, 15},
		{"commit past the end read earlier is no lag", 30, 0, 25, 0},
		{"end unknown", 10, 0, -1, 0},
		{"start unknown, never committed", -1, -1, 40, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := partitionLag(tc.committed, tc.start, tc.end); got != tc.want {
				t.Fatalf("partitionLag(%d, %d, %d) = %d, want %d", tc.committed, tc.start, tc.end, got, tc.want)
			}
		})
	}
}

func TestOffsetRates(t *testing.T) {
	tp := func(topic string, p int32) topicPartition { return topicPartition{topic, p} }
	byTopic := func(k topicPartition) string { return k.topic }
	for _, tc := range []struct {
		name      string
		prev, cur map[topicPartition]int64
		dt        time.Duration
		want      map[string]float64
	}{
		{"first read has no rates", nil, map[topicPartition]int64{tp("a", 0): 100}, 2 * time.Second, map[string]float64{}},
		{"partitions sum per topic",
			map[topicPartition]int64{tp("a", 0): 100, tp("a", 1): 50, tp("b", 0): 7},
			map[topicPartition]int64{tp("a", 0): 120, tp("a", 1): 70, tp("b", 0): 7},
			2 * time.Second, map[string]float64{"a": 20, "b": 0}},
		{"a new partition contributes nothing yet",
			map[topicPartition]int64{tp("a", 0): 100},
			map[topicPartition]int64{tp("a", 0): 110, tp("a", 1): 500},
			time.Second, map[string]float64{"a": 10}},
		{"a topic that appeared is listed with rate 0",
			map[topicPartition]int64{},
			map[topicPartition]int64{tp("new", 0): 1000},
			time.Second, map[string]float64{"new": 0}},
		{"offsets going back are no negative throughput",
			map[topicPartition]int64{tp("a", 0): 100, tp("a", 1): 10},
			map[topicPartition]int64{tp("a", 0): 5, tp("a", 1): 14},
			time.Second, map[string]float64{"a": 4}},
		{"sub-second interval scales up",
			map[topicPartition]int64{tp("a", 0): 0},
			map[topicPartition]int64{tp("a", 0): 30},
			500 * time.Millisecond, map[string]float64{"a": 60}},
		{"zero interval has no rates",
			map[topicPartition]int64{tp("a", 0): 0},
			map[topicPartition]int64{tp("a", 0): 30},
			0, map[string]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := offsetRates(tc.prev, tc.cur, tc.dt, byTopic)
			if len(got) != len(tc.want) {
				t.Fatalf("rates %v, want %v", got, tc.want)
			}
			for k, w := range tc.want {
				if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
					t.Fatalf("rates %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// Two reads of a small cluster: the snapshot carries placement, offsets,
// the under-replicated and offline partitions, per-topic produce rates and
// per-group lag and consume rates.
func TestBuildSnapshot(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	read := func(at time.Time, endA0, endA1, committedA0 int64) *clusterRead {
		return &clusterRead{
			at: at, controller: 2,
			brokers: []Broker{{ID: 1, Host: "h1", Port: 9092}, {ID: 2, Host: "h2", Port: 9092}},
			topics: []topicRead{
				{name: "clicks", partitions: []partitionRead{
					{partition: 1, leader: 2, replicas: []int32{2, 1}, isr: []int32{2}},
					{partition: 0, leader: 1, replicas: []int32{1, 2}, isr: []int32{1, 2}},
				}},
				{name: "dark", partitions: []partitionRead{{partition: 0, leader: -1, replicas: []int32{3}, isr: []int32{}}}},
			},
			starts: map[topicPartition]int64{{"clicks", 0}: 0, {"clicks", 1}: 4},
			ends:   map[topicPartition]int64{{"clicks", 0}: endA0, {"clicks", 1}: endA1},
			groups: []groupRead{
				{name: "lake", state: "Stable", members: 1,
					committed: map[topicPartition]int64{{"clicks", 0}: committedA0},
					assigned:  map[topicPartition]string{{"clicks", 0}: "m-1", {"clicks", 1}: "m-1"}},
				{name: "audit", state: "Empty", committed: map[topicPartition]int64{}, assigned: map[topicPartition]string{}},
			},
		}
	}
	first := read(t0, 100, 40, 60)
	s1 := buildSnapshot(nil, first)
	if s1.IntervalSeconds != 0 || s1.Topics[0].ProduceRate != 0 {
		t.Fatalf("first snapshot has rates: %+v", s1)
	}
	s := buildSnapshot(first, read(t0.Add(2*time.Second), 130, 50, 90))

	if s.Controller != 2 || len(s.Brokers) != 2 || s.IntervalSeconds != 2 {
		t.Fatalf("header %+v", s)
	}
	if len(s.Topics) != 2 || s.Topics[0].Name != "clicks" || s.Topics[1].Name != "dark" {
		t.Fatalf("topics %+v", s.Topics)
	}
	clicks := s.Topics[0]
	if clicks.ProduceRate != 20 || clicks.Records != 130+46 || clicks.UnderReplicated != 1 || clicks.Offline != 0 || clicks.ReplicationFactor != 2 {
		t.Fatalf("clicks %+v", clicks)
	}
	if p := clicks.Partitions; p[0].Partition != 0 || p[1].Partition != 1 || !p[1].UnderReplicated || p[0].UnderReplicated || p[1].EndOffset != 50 || p[1].StartOffset != 4 {
		t.Fatalf("partitions %+v", p)
	}
	if dark := s.Topics[1]; dark.Offline != 1 || dark.UnderReplicated != 1 || dark.Partitions[0].EndOffset != -1 {
		t.Fatalf("dark %+v", dark)
	}
	if s.UnderReplicated != 2 || s.Offline != 1 {
		t.Fatalf("totals %d under-replicated, %d offline", s.UnderReplicated, s.Offline)
	}

	if len(s.Groups) != 2 || s.Groups[0].Name != "audit" || s.Groups[1].Name != "lake" {
		t.Fatalf("groups %+v", s.Groups)
	}
	if audit := s.Groups[0]; audit.Lag != 0 || len(audit.Topics) != 0 {
		t.Fatalf("audit %+v", audit)
	}
	lake := s.Groups[1]
	// Partition 0: 130-90 = 40. Partition 1 is assigned but never
	// committed: everything from its start, 50-4 = 46.
	if lake.Lag != 86 || lake.ConsumeRate != 15 || len(lake.Topics) != 1 {
		t.Fatalf("lake %+v", lake)
	}
	gp := lake.Topics[0].Partitions
	if len(gp) != 2 || gp[0].Lag != 40 || gp[0].Committed != 90 || gp[1].Committed != -1 || gp[1].Lag != 46 || gp[1].Member != "m-1" {
		t.Fatalf("lake partitions %+v", gp)
	}
}
