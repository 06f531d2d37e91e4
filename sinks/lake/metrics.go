package lake

import "github.com/prometheus/client_golang/prometheus"

// metrics are the worker's Prometheus series.
type metrics struct {
	rows               *prometheus.CounterVec   // topic
	files              *prometheus.CounterVec   // topic
	bytes              *prometheus.CounterVec   // topic
	deadLetters        *prometheus.CounterVec   // topic
	undecodableBatches *prometheus.CounterVec   // topic
	windows            *prometheus.CounterVec   // topic, reason
	lag                *prometheus.GaugeVec     // topic, partition
	commitLatency      *prometheus.HistogramVec // topic, format
	commitWait         *prometheus.HistogramVec // topic
	openFiles          prometheus.Gauge         //
	markers            *prometheus.CounterVec   // topic
	duplicates         *prometheus.CounterVec   // topic
	withoutID          *prometheus.CounterVec   // topic
	dedupRebuilt       *prometheus.CounterVec   // topic
	auditFailures      *prometheus.CounterVec   // topic

	reg prometheus.Registerer // where they are registered, or nil
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "rows_total", Help: "Rows landed in published Parquet files."}, []string{"topic"}),
		files: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "files_total", Help: "Parquet files published."}, []string{"topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "bytes_total", Help: "Bytes of Parquet files published."}, []string{"topic"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "dead_letters_total", Help: "Records sent to the dead-letter topic."}, []string{"topic"}),
		undecodableBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "undecodable_batches_total",
			Help: "Batches whose records could not be decompressed or are malformed, sent to the dead-letter topic as one record each and skipped."},
			[]string{"topic"}),
		windows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "windows_total", Help: "Commit windows ended, by what ended them."}, []string{"topic", "reason"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "lag_records", Help: "Records between the last record read and the partition's high watermark."},
			[]string{"topic", "partition"}),
		// One span for both formats, so their latencies compare: what
		// makes a written window visible and durable, not the writing.
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "millrace", Subsystem: "lake",
			Name:    "commit_seconds",
			Help:    "Time to commit a landed window, from its closed files to its durable end: with format hive, publishing the files (renames), the audit records and the group offset commit; with format iceberg, publishing the files, the audit records, reading their footers for statistics, the table commit (the dead-letter table's first, if any) and the group offset commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"topic", "format"}),
		// With format iceberg the commit runs beside the landing
		// (pipeline.go): this is what of it the landing still waits for.
		commitWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "millrace", Subsystem: "lake",
			Name:    "commit_wait_seconds",
			Help:    "Time the landing waited for the commit of the window before (format iceberg, whose commits run while the next window is written), by that window's topic: near zero while commits keep up with the rolls.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"topic"}),
		openFiles: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "open_files", Help: "Parquet files being written."}),
		markers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "success_markers_total", Help: "_SUCCESS markers written."}, []string{"topic"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "duplicates_dropped_total", Help: "Records dropped as repeats of an event id, in landed windows."}, []string{"topic"}),
		withoutID: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "records_without_id_total", Help: "Rows landed without an event id that dedup recognises, in landed windows."}, []string{"topic"}),
		dedupRebuilt: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "dedup_records_reread_total", Help: "Records read again to rebuild a partition's remembered ids after an assignment."}, []string{"topic"}),
		auditFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: "audit_publish_failures_total", Help: "Windows landed although the broker refused their audit records (their counts are missing from the audit)."}, []string{"topic"}),
	}
	if reg != nil {
		reg.MustRegister(m.all()...)
		m.reg = reg
	}
	return m
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.rows, m.files, m.bytes, m.deadLetters, m.undecodableBatches, m.windows, m.lag, m.commitLatency, m.commitWait, m.openFiles, m.markers, m.duplicates, m.withoutID, m.dedupRebuilt, m.auditFailures}
}

// unregister removes the series, so a worker that replaces this one (see
// the appliance's sink restarts) can register its own.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.all() {
		m.reg.Unregister(c)
	}
}
