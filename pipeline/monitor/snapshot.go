// Package monitor watches a millrace cluster for operators: a Collector reads
// the cluster through the Kafka admin API (brokers, topics, partitions,
// consumer groups and their offsets) and follows the ops metrics topic
// (_millrace.metrics) for the components' own counters, and turns both into
// a Snapshot with rates derived from successive reads. `millrace top` draws
// snapshots as text (WriteText); the web console (Handler) serves them as
// JSON to a page that draws its own charts.
package monitor

import (
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Snapshot is one view of the cluster and its components. It is plain data
// and encodes to the JSON the console reads.
type Snapshot struct {
	// Seq counts the cluster reads the collector has made; rates need two,
	// so they exist from Seq 2 on.
	Seq uint64 `json:"seq"`
	// Time is when the cluster was read.
	Time time.Time `json:"time"`
	// IntervalSeconds is the time since the previous read, over which the
	// rates were taken (0 on the first read: no rates yet).
	IntervalSeconds float64 `json:"interval_seconds"`
	// ClusterID is the broker-reported cluster ID, if any.
	ClusterID string `json:"cluster_id,omitempty"`
	// Controller is the controller's broker ID (-1 when unknown).
	Controller int32       `json:"controller"`
	Brokers    []Broker    `json:"brokers"`
	Topics     []Topic     `json:"topics"`
	Groups     []Group     `json:"groups"`
	Components []Component `json:"components"`
	// Inputs are the ingest inputs' rates and errors (inputs.go).
	Inputs []Input `json:"inputs"`
	// Problems are what the components report keeps their records from
	// shipping, with what to do (a missing topic, a denied write).
	Problems []Problem `json:"problems"`
	// Quotas are the client quota entities the brokers measured, with
	// their usage and throttle time (quotas.go).
	Quotas []Quota `json:"quotas"`
	// UnderReplicated and Offline count partitions across all topics.
	UnderReplicated int `json:"under_replicated"`
	Offline         int `json:"offline"`
	// MetricsTopic is the ops topic the components' counters come from.
	MetricsTopic string `json:"metrics_topic"`
	// Errors are what could not be read this time, one sentence each; the
	// rest of the snapshot is still valid.
	Errors []string `json:"errors,omitempty"`
}

// Broker is one live broker.
type Broker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Disk is what the broker reported of its log directory
	// (DescribeLogDirs); nil when it did not answer in time.
	Disk *Disk `json:"disk,omitempty"`
}

// Disk is a broker's log directory: the replicas it holds, their bytes, and
// its volume's usable and total bytes (-1 when not reported).
type Disk struct {
	Replicas    int   `json:"replicas"`
	LogBytes    int64 `json:"log_bytes"`
	UsableBytes int64 `json:"usable_bytes"`
	TotalBytes  int64 `json:"total_bytes"`
}

// DiskOf sums a broker's DescribeLogDirs answer; nil when no directory was
// described.
func DiskOf(dirs kadm.DescribedLogDirs) *Disk {
	var disk *Disk
	for _, d := range dirs {
		if d.Err != nil {
			continue
		}
		if disk == nil {
			disk = &Disk{UsableBytes: -1, TotalBytes: -1}
		}
		for _, parts := range d.Topics {
			disk.Replicas += len(parts)
		}
		disk.LogBytes += d.Size()
		if d.TotalBytes >= 0 {
			disk.UsableBytes, disk.TotalBytes = d.UsableBytes, d.TotalBytes
		}
	}
	return disk
}

// Free writes the volume's usable and total bytes as usable/total, "-"
// when not reported.
func (d *Disk) Free() string {
	if d == nil || d.TotalBytes < 0 {
		return "-"
	}
	return IECBytes(d.UsableBytes) + "/" + IECBytes(d.TotalBytes)
}

// Topic is a topic with its partitions and its produce rate.
type Topic struct {
	Name       string      `json:"name"`
	Internal   bool        `json:"internal,omitempty"`
	Partitions []Partition `json:"partitions"`
	// ReplicationFactor is the replica count of the first partition.
	ReplicationFactor int `json:"replication_factor"`
	// Records is the sum over partitions of end minus start offset: what
	// the topic retains.
	Records int64 `json:"records"`
	// ProduceRate is records per second appended since the previous read
	// (from the growth of the end offsets).
	ProduceRate     float64 `json:"produce_rate"`
	UnderReplicated int     `json:"under_replicated"`
	Offline         int     `json:"offline"`
}

// Partition is one partition's placement and offsets.
type Partition struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"` // -1: offline
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// StartOffset and EndOffset (the high watermark) are -1 when unknown.
	StartOffset     int64  `json:"start_offset"`
	EndOffset       int64  `json:"end_offset"`
	UnderReplicated bool   `json:"under_replicated,omitempty"`
	Err             string `json:"error,omitempty"`
}

// Group is a consumer group with its lag.
type Group struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type,omitempty"`
	Members      int    `json:"members"`
	// Lag is the sum of the topics' lags.
	Lag int64 `json:"lag"`
	// ConsumeRate is records per second committed since the previous read.
	ConsumeRate float64      `json:"consume_rate"`
	Topics      []GroupTopic `json:"topics"`
	Err         string       `json:"error,omitempty"`
}

// GroupTopic is a group's progress on one topic.
type GroupTopic struct {
	Topic       string           `json:"topic"`
	Lag         int64            `json:"lag"`
	ConsumeRate float64          `json:"consume_rate"`
	Partitions  []GroupPartition `json:"partitions"`
}

// GroupPartition is a group's position on one partition.
type GroupPartition struct {
	Partition int32 `json:"partition"`
	// Committed is -1 when the group has not committed on this partition.
	Committed int64  `json:"committed"`
	EndOffset int64  `json:"end_offset"`
	Lag       int64  `json:"lag"`
	Member    string `json:"member,omitempty"`
}

// Component is one agent or sink seen on the ops metrics topic, with its
// throughput from its own counters.
type Component struct {
	// Kind is "agent", "beacon" or "sink".
	Kind string `json:"kind"`
	// Name tells the instance apart within its source: "tail:<input>",
	// "ship", a beacon stream, a sink name.
	Name string `json:"name"`
	// Source is the publishing process ("host:component").
	Source string `json:"source"`
	// Metric is the counter the throughput comes from.
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	// Rate is Unit per second between the last two samples.
	Rate float64 `json:"rate"`
	// Total is the counter's latest value.
	Total    float64   `json:"total"`
	LastSeen time.Time `json:"last_seen"`
	// Stale is set when the source stopped publishing: its rate is 0.
	Stale bool `json:"stale,omitempty"`
}
