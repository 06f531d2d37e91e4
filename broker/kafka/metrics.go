package kafka

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/broker/replica"
)

// brokerMetrics are the wire server's Prometheus metrics: requests and their
// latency by API, records and bytes produced per topic, and the leader's ISR
// changes. Fetched record bytes are counted where they are written (sendfile
// or copy); the partition gauges are read from the model at scrape time
// (replicationCollector).
type brokerMetrics struct {
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	producedRecs  *prometheus.CounterVec
	producedBytes *prometheus.CounterVec
	isrShrinks    prometheus.Counter
	isrExpands    prometheus.Counter
	refused       *prometheus.CounterVec
	// throttledConns counts connections slowed by a creation rate
	// (KIP-612, conn_rate.go), by the setting.
	throttledConns *prometheus.CounterVec
	// produceRefused counts produce refusals by reason (produce_refusals.go).
	produceRefused *prometheus.CounterVec
	saslAuth       *prometheus.CounterVec
	// KIP-392: consumer fetches served from a followed partition, their
	// record bytes, and leader answers naming a preferred read replica.
	followerFetches   prometheus.Counter
	followerBytes     prometheus.Counter
	readReplicaAnswer prometheus.Counter
	// streamedRecordBytes counts the record bytes this broker wrote from
	// log slices to consumers and followers (conn.writeStream; not the
	// in-memory fallback, so tests can tell the path was taken).
	streamedRecordBytes atomic.Int64
}

func newBrokerMetrics(reg prometheus.Registerer, model *cluster.Cluster, logs *log.Manager, b *Broker) (*brokerMetrics, error) {
	m := &brokerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_requests_total", Help: "Kafka requests served, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "millrace_broker_request_duration_seconds", Help: "Time to serve a request, by API (long-poll fetches include their wait).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"api"}),
		producedRecs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_produced_records_total", Help: "Records appended by produce requests, by topic.",
		}, []string{"topic"}),
		producedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_produced_bytes_total", Help: "Record-batch bytes appended by produce requests, by topic.",
		}, []string{"topic"}),
		// Kafka's IsrShrinksPerSec and IsrExpandsPerSec, as counters so
		// Prometheus takes the rate.
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_broker_isr_shrinks_total", Help: "ISR shrinks this broker wrote as a partition leader (lagging followers removed).",
		}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_broker_isr_expands_total", Help: "ISR expansions this broker wrote as a partition leader (caught-up followers added back).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_connections_refused_total", Help: "Connections closed as soon as accepted, by the limit they were over (max.connections, max.connections.per.ip).",
		}, []string{"limit"}),
		throttledConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_connections_throttled_total", Help: "Connections made to wait before they were served, by the creation rate they were over (max.connection.creation.rate per listener, an ip entity's connection_creation_rate quota per address; KIP-612).",
		}, []string{"limit"}),
		produceRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_produce_refused_total", Help: "Partitions of produce requests answered with an error, by error (Kafka's name, e.g. INVALID_RECORD): refused before anything was appended, or, for the errors that come after the append (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND), appended but not acknowledged.",
		}, []string{"reason"}),
		saslAuth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_broker_sasl_authentications_total", Help: "SASL authentications (re-authentications included), by mechanism and result (ok; failed: the password was checked and wrong, or the user unknown; throttled: over a failed-authentication limit, nothing checked).",
		}, []string{"mechanism", "result"}),
		followerFetches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_broker_follower_fetch_requests_total", Help: "Consumer fetch requests that read at least one partition this broker follows (KIP-392: sent here as the consumer's preferred read replica).",
		}),
		followerBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_broker_follower_fetch_bytes_total", Help: "Record bytes sent to consumers from partitions this broker follows (KIP-392).",
		}),
		readReplicaAnswer: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_broker_preferred_read_replica_answers_total", Help: "Partitions this broker, as leader, answered with a preferred read replica: a follower in the consumer's rack (replica.selector.class, KIP-392).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	fetched := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "millrace_broker_fetched_record_bytes_total", Help: "Record bytes sent to consumers and followers.",
	}, func() float64 { return float64(m.streamedRecordBytes.Load()) })
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_broker_connections", Help: "Client connections open (max.connections bounds them).",
	}, func() float64 { return float64(b.admission.open()) })
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_broker_queued_request_bytes", Help: "Request bytes read and not yet answered, as charged against queued.max.request.bytes (requests other than Produce count what decoding them may allocate).",
	}, func() float64 { return float64(b.budget.used.Load()) })
	for _, c := range append([]prometheus.Collector{m.requests, m.latency, m.producedRecs, m.producedBytes, m.isrShrinks, m.isrExpands, m.refused, m.throttledConns, m.produceRefused, m.saslAuth, m.followerFetches, m.followerBytes, m.readReplicaAnswer, fetched, open, queued, newReplicationCollector(model, logs), newDiskCollector(logs)}, fetchSessionMetrics(b)...) {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return nil, err
		}
	}
	return m, nil
}

// served records one request that arrived at start.
func (m *brokerMetrics) served(key int16, start time.Time) {
	api := kmsg.NameForKey(key)
	m.requests.WithLabelValues(api).Inc()
	m.latency.WithLabelValues(api).Observe(time.Since(start).Seconds())
}

// produced records one successful append. The topic name may point into a
// Produce frame that is reused once the request is answered (framepool.go),
// and a new label value is kept by the metric for good: it is copied.
func (m *brokerMetrics) produced(topic string, records, bytes int) {
	topic = strings.Clone(topic)
	m.producedRecs.WithLabelValues(topic).Add(float64(records))
	m.producedBytes.WithLabelValues(topic).Add(float64(bytes))
}

// fetchedFromReplica counts what a Fetch answer owes to KIP-392: reads as
// a follower, and partitions sent to their preferred read replica.
func (m *brokerMetrics) fetchedFromReplica(f *streamedFetch) {
	if f.followerReads > 0 {
		m.followerFetches.Inc()
		m.followerBytes.Add(float64(f.followerBytes))
	}
	if f.redirected > 0 {
		m.readReplicaAnswer.Add(float64(f.redirected))
	}
}

// connectionRefused counts a connection refused by limit.
func (m *brokerMetrics) connectionRefused(limit string) {
	m.refused.WithLabelValues(limit).Inc()
}

// connectionThrottled counts a connection slowed by limit.
func (m *brokerMetrics) connectionThrottled(limit string) {
	m.throttledConns.WithLabelValues(limit).Inc()
}

// produceRefusal counts a produce partition answered with the error
// named reason (a Kafka error name: few values).
func (m *brokerMetrics) produceRefusal(reason string) {
	m.produceRefused.WithLabelValues(reason).Inc()
}

// saslAuthenticated counts one SASL authentication. The mechanism is one
// the handshake accepted, so the label values are few.
func (m *brokerMetrics) saslAuthenticated(mechanism, result string) {
	m.saslAuth.WithLabelValues(mechanism, result).Inc()
}

// isrChanged records an ISR change the leader wrote. A change either
// removes or adds followers (replica.Leader proposes one kind at a time).
func (m *brokerMetrics) isrChanged(change replica.ISRChange) {
	if len(change.Removed) > 0 {
		m.isrShrinks.Inc()
	}
	if len(change.Added) > 0 {
		m.isrExpands.Inc()
	}
}

// replicationCollector reports the partition gauges operators watch first
// (Kafka's UnderReplicatedPartitions, LeaderCount, PartitionCount,
// ActiveControllerCount, OfflinePartitionsCount), counted from the cluster
// model when scraped: the model already follows every state znode, so
// nothing has to be updated on each change and the numbers cannot drift.
// The partitions whose local log refuses appends after a failed write come
// from the log manager (broker/log/recover_writes.go).
type replicationCollector struct {
	model            *cluster.Cluster
	logs             *log.Manager
	storageError     *prometheus.Desc
	underReplicated  *prometheus.Desc
	leaders          *prometheus.Desc
	partitions       *prometheus.Desc
	activeController *prometheus.Desc
	offline          *prometheus.Desc
}

func newReplicationCollector(model *cluster.Cluster, logs *log.Manager) *replicationCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &replicationCollector{
		model:            model,
		logs:             logs,
		storageError:     desc("millrace_broker_storage_error_partitions", "Partitions this broker hosts whose log refuses appends after a failed write (a full or failing disk); produce gets KAFKA_STORAGE_ERROR. Retried every 2 s; a failed fsync needs a restart."),
		underReplicated:  desc("millrace_broker_under_replicated_partitions", "Partitions this broker leads whose ISR is smaller than their replica set."),
		leaders:          desc("millrace_broker_leader_partitions", "Partitions this broker leads."),
		partitions:       desc("millrace_broker_partitions", "Partitions this broker hosts a replica of."),
		activeController: desc("millrace_broker_active_controller", "1 on the broker that is the controller, 0 on the others."),
		offline:          desc("millrace_broker_offline_partitions", "Partitions without a live leader, counted by the controller, plus those this broker leads whose log refuses appends after a failed write (counted by this broker)."),
	}
}

// Describe implements prometheus.Collector.
func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.underReplicated, c.leaders, c.partitions, c.activeController, c.offline, c.storageError} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	me := c.model.BrokerID()
	controller := c.model.ControllerID() == me
	var alive map[int32]bool
	if controller {
		alive = cluster.AliveSet(c.model.Brokers())
	}
	var refusing map[log.TopicPartition]bool
	if c.logs != nil {
		refusing = c.logs.Refusing()
	}
	counts := countPartitions(c.model.Topics(), me, alive, refusing)
	active := 0.0
	if controller {
		active = 1
	}
	for _, g := range []struct {
		desc  *prometheus.Desc
		value float64
	}{
		{c.underReplicated, float64(counts.underReplicated)},
		{c.leaders, float64(counts.leaders)},
		{c.partitions, float64(counts.hosted)},
		{c.activeController, active},
		{c.offline, float64(counts.offline)},
		{c.storageError, float64(len(refusing))},
	} {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value)
	}
}

// partitionCounts are the partition gauges' values.
type partitionCounts struct {
	hosted, leaders, underReplicated, offline int
}

// countPartitions counts the partitions of topics that broker me hosts and
// leads, those it leads with an ISR smaller than the replica set, and, when
// alive (the live brokers) is given, those whose leader is none or dead.
// A dead leader counts as offline because no one serves the partition
// until the controller elects another. A partition me leads whose log is
// in refusing (appends fail after a failed write) counts as offline too:
// no one can write to it, as with a Kafka log directory gone offline.
func countPartitions(topics []*cluster.Topic, me int32, alive map[int32]bool, refusing map[log.TopicPartition]bool) partitionCounts {
	var n partitionCounts
	for _, t := range topics {
		for _, p := range t.Partitions {
			if slices.Contains(p.Replicas, me) {
				n.hosted++
			}
			if p.Leader == me {
				n.leaders++
				if len(p.ISR) < len(p.Replicas) {
					n.underReplicated++
				}
			}
			switch {
			case alive != nil && (p.Leader < 0 || !alive[p.Leader]):
				n.offline++
			case p.Leader == me && refusing[log.TopicPartition{Topic: t.Name, Partition: p.Partition}]:
				n.offline++
			}
		}
	}
	return n
}

// diskCollector reports what the broker's logs take on disk, per topic, and
// the data volume's usable and total bytes (Kafka's Log Size and the log
// directory's free space, which DescribeLogDirs reports too), read when
// scraped.
type diskCollector struct {
	logs          *log.Manager
	size          *prometheus.Desc
	usable, total *prometheus.Desc
}

func newDiskCollector(logs *log.Manager) *diskCollector {
	return &diskCollector{
		logs:   logs,
		size:   prometheus.NewDesc("millrace_broker_log_size_bytes", "Bytes of the topic's partition logs this broker holds (leader and follower replicas).", []string{"topic"}, nil),
		usable: prometheus.NewDesc("millrace_broker_log_dir_usable_bytes", "Bytes free for the broker on its data directory's volume.", nil, nil),
		total:  prometheus.NewDesc("millrace_broker_log_dir_total_bytes", "Size of the broker's data directory's volume.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.usable
	ch <- c.total
}

// Collect implements prometheus.Collector.
func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	if c.logs == nil {
		return
	}
	sizes := map[string]int64{}
	for tp, l := range c.logs.All() {
		sizes[tp.Topic] += l.Size()
	}
	for topic, n := range sizes {
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(n), topic)
	}
	if total, usable, ok := volumeBytes(c.logs.DataDir()); ok {
		ch <- prometheus.MustNewConstMetric(c.usable, prometheus.GaugeValue, float64(usable))
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(total))
	}
}
