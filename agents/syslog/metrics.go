package syslog

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the receiver's Prometheus collectors.
type metrics struct {
	received      *prometheus.CounterVec
	messages      *prometheus.CounterVec
	truncated     *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	produced      prometheus.Counter
	produceErrors prometheus.Counter
	refused       prometheus.Counter
	closed        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_syslog_received_total",
			Help: "Messages read, by transport (udp, tcp, tls), before parsing.",
		}, []string{"transport"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_syslog_messages_total",
			Help: "Messages parsed, by transport and result: parsed, or malformed (produced with raw and parse_error).",
		}, []string{"transport", "result"}),
		truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_syslog_truncated_total",
			Help: "Messages longer than max_message_bytes, cut to it and flagged truncated, by transport.",
		}, []string{"transport"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_syslog_dropped_total",
			Help: "Messages read and not produced, by reason: udp_queue_full (the producer was behind and udp_queue was full).",
		}, []string{"reason"}),
		produced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_syslog_produced_total",
			Help: "Records the broker acknowledged.",
		}),
		produceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_syslog_produce_errors_total",
			Help: "Records the producer failed to deliver; their messages are lost.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_syslog_connections_refused_total",
			Help: "TCP and TLS connections closed at once because max_connections were open.",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "millrace_syslog_connections_closed_total",
			Help: "TCP and TLS connections ended, by reason: eof (the sender closed), idle_timeout, framing_error, error (TLS handshake or read), shutdown.",
		}, []string{"reason"}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_syslog_connections_open",
		Help: "TCP and TLS connections open now.",
	}, func() float64 { return float64(len(s.slots)) })
	queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "millrace_syslog_udp_queue_length",
		Help: "Datagrams read and waiting for the producer (at most udp_queue).",
	}, func() float64 { return float64(len(s.queue)) })
	if reg == nil {
		return m, nil
	}
	collectors := []prometheus.Collector{m.received, m.messages, m.truncated, m.dropped, m.produced, m.produceErrors, m.refused, m.closed, open, queued}
	if _, ok := readUDPSNMP(procSNMP); ok {
		collectors = append(collectors,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "millrace_syslog_kernel_udp_in_errors",
				Help: "UdpInErrors of /proc/net/snmp: datagrams the host's kernel could not deliver, for every UDP socket of the host.",
			}, func() float64 { c, _ := readUDPSNMP(procSNMP); return float64(c.inErrors) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "millrace_syslog_kernel_udp_rcvbuf_errors",
				Help: "UdpRcvbufErrors of /proc/net/snmp: datagrams the host's kernel dropped because a socket's receive buffer was full, for every UDP socket of the host.",
			}, func() float64 { c, _ := readUDPSNMP(procSNMP); return float64(c.rcvbufErrors) }))
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// procSNMP is Linux's per-host protocol counters file.
const procSNMP = "/proc/net/snmp"

// udpSNMP are the UDP counters of /proc/net/snmp.
type udpSNMP struct{ inErrors, rcvbufErrors uint64 }

// readUDPSNMP reads the two "Udp:" lines of path, names then values.
func readUDPSNMP(path string) (udpSNMP, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return udpSNMP{}, false
	}
	return parseUDPSNMP(data)
}

func parseUDPSNMP(data []byte) (udpSNMP, bool) {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		var c udpSNMP
		found := 0
		for i := 1; i < len(fields) && i < len(names); i++ {
			v, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				continue
			}
			switch names[i] {
			case "InErrors":
				c.inErrors, found = v, found+1
			case "RcvbufErrors":
				c.rcvbufErrors, found = v, found+1
			}
		}
		return c, found == 2
	}
	return udpSNMP{}, false
}
