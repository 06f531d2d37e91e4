package monitor

import (
	"cmp"
	"slices"
	"time"
)

// This file turns raw cluster reads into a Snapshot. It does no I/O, so the
// lag and rate rules are tested exactly with tables.

// topicPartition names a partition.
type topicPartition struct {
	topic     string
	partition int32
}

// groupPartition names a group's position on a partition.
type groupPartition struct {
	group string
	topicPartition
}

// clusterRead is what one pass over the admin API returned.
type clusterRead struct {
	at         time.Time
	clusterID  string
	controller int32
	brokers    []Broker
	topics     []topicRead
	// starts and ends hold the offsets that were read; a partition whose
	// offsets failed is missing and has an entry in offsetErrs.
	starts, ends map[topicPartition]int64
	offsetErrs   map[topicPartition]string
	groups       []groupRead
	errs         []string
}

type topicRead struct {
	name       string
	internal   bool
	partitions []partitionRead
}

type partitionRead struct {
	partition   int32
	leader      int32
	leaderEpoch int32
	replicas    []int32
	isr         []int32
	err         string
}

type groupRead struct {
	name, state, protocolType string
	members                   int
	// committed holds the committed offsets; assigned maps the partitions
	// members hold (possibly without a commit yet) to the member's ID.
	committed map[topicPartition]int64
	assigned  map[topicPartition]string
	err       string
}

// partitionLag is how many records a group still has to read on a
// partition: end minus the committed offset. A partition never committed
// counts from the log start (everything retained is unread), and so does a
// commit below the log start, because records deleted by retention can no
// longer be read. A commit past the end (the end read before the commit)
// is no lag, not a negative one.
func partitionLag(committed, start, end int64) int64 {
	if end < 0 {
		return 0
	}
	from := committed
	if from < 0 || (start >= 0 && from < start) {
		from = max(start, 0)
	}
	return max(end-from, 0)
}

// offsetRates sums, per key, how far offsets moved between two reads dt
// apart, in records per second. Only positions present in both reads count:
// a partition that just appeared has no earlier offset to compare with,
// and one whose offset went backwards (a recreated topic, a reset group) is
// no progress rather than negative throughput.
func offsetRates[P comparable, K comparable](prev, cur map[P]int64, dt time.Duration, key func(P) K) map[K]float64 {
	out := make(map[K]float64)
	if prev == nil || dt <= 0 {
		return out
	}
	seconds := dt.Seconds()
	for p, now := range cur {
		k := key(p)
		before, ok := prev[p]
		if _, seen := out[k]; !seen {
			out[k] = 0
		}
		if !ok || before < 0 || now < before {
			continue
		}
		out[k] += float64(now-before) / seconds
	}
	return out
}

// underReplicated reports a partition with fewer in-sync replicas than
// replicas.
func underReplicated(p partitionRead) bool { return len(p.isr) < len(p.replicas) }

// buildSnapshot derives the cluster part of a snapshot from the current
// read and the previous one (nil on the first read).
func buildSnapshot(prev, cur *clusterRead) Snapshot {
	// Empty lists stay [] in JSON, not null, for the page.
	s := Snapshot{Time: cur.at, ClusterID: cur.clusterID, Controller: cur.controller, Brokers: cur.brokers, Errors: cur.errs,
		Topics: []Topic{}, Groups: []Group{}}
	if s.Brokers == nil {
		s.Brokers = []Broker{}
	}
	var dt time.Duration
	var prevEnds map[topicPartition]int64
	var prevCommitted map[groupPartition]int64
	if prev != nil {
		dt = cur.at.Sub(prev.at)
		s.IntervalSeconds = dt.Seconds()
		prevEnds = prev.ends
		prevCommitted = committedByGroup(prev.groups)
	}
	produce := offsetRates(prevEnds, cur.ends, dt, func(tp topicPartition) string { return tp.topic })
	for _, tr := range cur.topics {
		t := Topic{Name: tr.name, Internal: tr.internal, ProduceRate: produce[tr.name], Partitions: []Partition{}}
		for _, pr := range tr.partitions {
			tp := topicPartition{tr.name, pr.partition}
			p := Partition{
				Partition: pr.partition, Leader: pr.leader, LeaderEpoch: pr.leaderEpoch,
				Replicas: orEmpty(pr.replicas), ISR: orEmpty(pr.isr),
				StartOffset: offsetOr(cur.starts, tp), EndOffset: offsetOr(cur.ends, tp),
				UnderReplicated: underReplicated(pr), Err: pr.err,
			}
			if p.Err == "" {
				p.Err = cur.offsetErrs[tp]
			}
			if p.UnderReplicated {
				t.UnderReplicated++
			}
			if pr.leader < 0 {
				t.Offline++
			}
			if p.StartOffset >= 0 && p.EndOffset >= p.StartOffset {
				t.Records += p.EndOffset - p.StartOffset
			}
			t.Partitions = append(t.Partitions, p)
		}
		slices.SortFunc(t.Partitions, func(a, b Partition) int { return cmp.Compare(a.Partition, b.Partition) })
		if len(t.Partitions) > 0 {
			t.ReplicationFactor = len(t.Partitions[0].Replicas)
		}
		s.UnderReplicated += t.UnderReplicated
		s.Offline += t.Offline
		s.Topics = append(s.Topics, t)
	}
	slices.SortFunc(s.Topics, func(a, b Topic) int { return cmp.Compare(a.Name, b.Name) })

	curCommitted := committedByGroup(cur.groups)
	consume := offsetRates(prevCommitted, curCommitted, dt, func(gp groupPartition) [2]string { return [2]string{gp.group, gp.topic} })
	for _, gr := range cur.groups {
		s.Groups = append(s.Groups, buildGroup(gr, cur.starts, cur.ends, consume))
	}
	slices.SortFunc(s.Groups, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	return s
}

// buildGroup computes a group's lag per partition and topic over every
// partition it committed on or has assigned.
func buildGroup(gr groupRead, starts, ends map[topicPartition]int64, consume map[[2]string]float64) Group {
	g := Group{Name: gr.name, State: gr.state, ProtocolType: gr.protocolType, Members: gr.members, Err: gr.err, Topics: []GroupTopic{}}
	positions := make(map[topicPartition]bool)
	for tp := range gr.committed {
		positions[tp] = true
	}
	for tp := range gr.assigned {
		positions[tp] = true
	}
	byTopic := make(map[string]*GroupTopic)
	for tp := range positions {
		gt := byTopic[tp.topic]
		if gt == nil {
			gt = &GroupTopic{Topic: tp.topic, ConsumeRate: consume[[2]string{gr.name, tp.topic}]}
			byTopic[tp.topic] = gt
		}
		committed, ok := gr.committed[tp]
		if !ok {
			committed = -1
		}
		end := offsetOr(ends, tp)
		lag := partitionLag(committed, offsetOr(starts, tp), end)
		gt.Partitions = append(gt.Partitions, GroupPartition{Partition: tp.partition, Committed: committed, EndOffset: end, Lag: lag, Member: gr.assigned[tp]})
		gt.Lag += lag
	}
	for _, gt := range byTopic {
		slices.SortFunc(gt.Partitions, func(a, b GroupPartition) int { return cmp.Compare(a.Partition, b.Partition) })
		g.Lag += gt.Lag
		g.ConsumeRate += gt.ConsumeRate
		g.Topics = append(g.Topics, *gt)
	}
	slices.SortFunc(g.Topics, func(a, b GroupTopic) int { return cmp.Compare(a.Topic, b.Topic) })
	return g
}

func committedByGroup(groups []groupRead) map[groupPartition]int64 {
	out := make(map[groupPartition]int64)
	for _, g := range groups {
		for tp, at := range g.committed {
			out[groupPartition{g.name, tp}] = at
		}
	}
	return out
}

func offsetOr(m map[topicPartition]int64, tp topicPartition) int64 {
	if v, ok := m[tp]; ok {
		return v
	}
	return -1
}

// orEmpty keeps JSON arrays as [] rather than null for the page.
func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
