package tail

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Tailer's Prometheus collectors.
type metrics struct {
	lines     prometheus.Counter
	bytes     prometheus.Counter
	truncated prometheus.Counter
	invalid   prometheus.Counter
	dropped   prometheus.Counter
	resent    prometheus.Counter
	rotations *prometheus.CounterVec
	symlinks  prometheus.Counter
	unparsed  prometheus.Counter
	filesOpen prometheus.Gauge
	lag       prometheus.Gauge
	inflight  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		lines: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_lines_read_total", Help: "Lines read from files.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_bytes_read_total", Help: "Bytes read from files.",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_lines_truncated_total", Help: "Events cut at max_line_bytes or multiline.max_lines.",
		}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_lines_invalid_utf8_total", Help: "Events whose invalid UTF-8 was replaced.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_records_dropped_total", Help: "Records the broker rejected permanently (logged, then skipped).",
		}),
		resent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_records_resent_total", Help: "Records produced again after a retryable failure.",
		}),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_tail_rotations_total", Help: "Rotations seen, by kind (rename, truncate, replaced).",
		}, []string{"kind"}),
		symlinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_symlinks_skipped_total", Help: "Symbolic links matched by a glob and skipped (symlinks is off), once per path.",
		}),
		unparsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tail_timestamp_unparsed_total", Help: "Events whose timestamp.pattern did not match or whose capture did not parse; their ts is the read time.",
		}),
		filesOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "millrace_tail_files_open", Help: "File descriptors held.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "millrace_tail_checkpoint_lag_bytes", Help: "Bytes in followed files after their checkpoints (not yet acknowledged).",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "millrace_tail_records_inflight", Help: "Records shipped and not yet acknowledged, as of the last checkpoint.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.lines, m.bytes, m.truncated, m.invalid, m.dropped, m.resent, m.rotations, m.symlinks, m.unparsed, m.filesOpen, m.lag, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
