package e2e

// The syslog receiver against real senders: Debian's rsyslog, started by
// the test with a configuration of its own (no local sockets, its own work
// directory and pid file), forwarding over UDP, octet-counted TCP and TLS
// (the gtls netstream driver of rsyslog-gnutls); util-linux logger sending
// over TCP and UDP to `millrace up`. Over TCP and TLS every message lands
// exactly once; over UDP each one lands or is counted as dropped.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/internal/waitfor"
	"millrace/pipeline/reconcile"
)

// syslogRecord is the part of a receiver's record the tests check.
type syslogRecord struct {
	EventID    string `json:"event_id"`
	Format     string `json:"format"`
	Host       string `json:"host"`
	App        string `json:"app"`
	MsgID      string `json:"msgid"`
	Message    string `json:"message"`
	Raw        string `json:"raw"`
	ParseError string `json:"parse_error"`
	Transport  string `json:"transport"`
}

// syslogEndpoints parses the "udp://ADDR, tcp://ADDR, tls://ADDR" list
// that follows prefix on a line of log, by transport.
func syslogEndpoints(t *testing.T, log, prefix string) map[string]string {
	t.Helper()
	for line := range strings.Lines(log) {
		_, list, ok := strings.Cut(line, prefix)
		if !ok {
			continue
		}
		list, _, _ = strings.Cut(strings.TrimSpace(list), " into ")
		out := map[string]string{}
		for _, e := range strings.Split(list, ", ") {
			scheme, addr, ok := strings.Cut(e, "://")
			if !ok {
				t.Fatalf("syslog endpoint %q in %q is not SCHEME://ADDR", e, line)
			}
			out[scheme] = addr
		}
		return out
	}
	t.Fatalf("no line with %q in the log", prefix)
	return nil
}

// startSyslog runs `millrace syslog` against b with UDP, TCP and, when
// cert is set, TLS listeners on free ports, its metrics on metricsAddr, and
// returns its endpoints by transport.
func startSyslog(t *testing.T, b *broker, metricsAddr, cert string, extra ...string) (*process, map[string]string) {
	t.Helper()
	args := []string{"syslog", "-b", b.addr, "--udp", "127.0.0.1:0", "--tcp", "127.0.0.1:0",
		"--metrics-listen", metricsAddr, "--ops-metrics-interval", "0"}
	if cert != "" {
		args = append(args, "--tls-listen", "127.0.0.1:0", "--tls-listen-cert", cert)
	}
	p := startProcess(t, "syslog", append(args, extra...)...)
	const banner = "millrace syslog receiving on "
	p.waitLog(banner, 1, 30*time.Second)
	return p, syslogEndpoints(t, p.log(), banner)
}

// topicReader reads a topic from its start, keeping every record.
type topicReader struct {
	t       *testing.T
	cl      *kgo.Client
	adm     *kadm.Client
	topic   string
	records []syslogRecord
}

func readTopic(t *testing.T, seeds []string, topic string) *topicReader {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &topicReader{t: t, cl: cl, adm: kadm.NewClient(cl), topic: topic}
}

// poll reads what arrived within a moment and reports whether everything
// up to the topic's end offsets (read before polling) has been read.
func (r *topicReader) poll() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, r.topic)
	var end int64
	if err == nil {
		ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	}
	fetches := r.cl.PollFetches(ctx)
	fetches.EachRecord(func(rec *kgo.Record) {
		var s syslogRecord
		if err := json.Unmarshal(rec.Value, &s); err != nil {
			r.t.Errorf("record at %s/%d@%d is not JSON: %v: %q", rec.Topic, rec.Partition, rec.Offset, err, rec.Value)
			return
		}
		r.records = append(r.records, s)
	})
	return err == nil && int64(len(r.records)) >= end
}

// until reads until cond holds over everything in the topic so far.
func (r *topicReader) until(what string, timeout time.Duration, cond func([]syslogRecord) bool) {
	r.t.Helper()
	defer reportLastSeen(r.t, func() string { return fmt.Sprintf("%d records: %+v", len(r.records), r.records) })()
	waitfor.Until(r.t, timeout, what, func() bool { return r.poll() && cond(r.records) })
}

// matching are the records that satisfy keep.
func matching(records []syslogRecord, keep func(syslogRecord) bool) []syslogRecord {
	var out []syslogRecord
	for _, r := range records {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// checkOnce checks that got holds each of want's messages exactly once,
// from host and app, with distinct event IDs.
func checkOnce(t *testing.T, what string, got []syslogRecord, host, app string, want []string) {
	t.Helper()
	ids, seen := map[string]bool{}, map[string]int{}
	for _, r := range got {
		if r.Host != host || r.App != app || r.ParseError != "" || r.Format != "rfc5424" {
			t.Errorf("%s: record %+v, want host %q, app %q, RFC 5424, no parse error", what, r, host, app)
		}
		if r.EventID == "" || ids[r.EventID] {
			t.Errorf("%s: event_id %q is empty or repeated", what, r.EventID)
		}
		ids[r.EventID] = true
		seen[r.Message]++
	}
	for _, m := range want {
		if seen[m] != 1 {
			t.Errorf("%s: message %q landed %d times, want once", what, m, seen[m])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d records, want %d", what, len(got), len(want))
	}
}

// messages are n numbered message texts.
func messages(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// logger runs util-linux logger with args, one message per line of lines.
func logger(t *testing.T, lines []string, args ...string) {
	t.Helper()
	run(t, 30*time.Second, strings.Join(lines, "\n")+"\n", "logger", args...)
}

// rsyslogd is Debian's rsyslog daemon, or the test fails saying how to
// install it.
func rsyslogd(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"rsyslogd", "/usr/sbin/rsyslogd"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("rsyslogd is not installed: run `make deps` (Debian packages rsyslog and rsyslog-gnutls)")
	return ""
}

// startRsyslog runs rsyslogd in the foreground with conf (its
// workDirectory is %WORK%) and waits until its TCP input at inputAddr
// accepts connections.
func startRsyslog(t *testing.T, conf, inputAddr string) *process {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(confPath, []byte(strings.ReplaceAll(conf, "%WORK%", work)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcessOf(t, &process{t: t, name: "rsyslogd", bin: rsyslogd(t),
		args: []string{"-n", "-f", confPath, "-i", filepath.Join(dir, "rsyslogd.pid")}})
	waitfor.Until(t, 20*time.Second, "rsyslogd's input to accept connections", func() bool {
		p.exitedEarly("listening")
		c, err := net.DialTimeout("tcp", inputAddr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return p
}

// TestSyslogFromRsyslog: logger hands messages to an rsyslogd of the
// test's own, which forwards each over UDP, octet-counted TCP and TLS to
// `millrace syslog`. TCP and TLS land every message exactly once with its
// host, app and msgid; UDP lands it or counts it as dropped.
func TestSyslogFromRsyslog(t *testing.T) {
	t.Parallel()
	const n = 20
	b := startBroker(t)
	b.createTopic(t, "syslog", 3, nil)
	pki := newTestPKI(t)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, at := startSyslog(t, b, metricsAddr, pki.broker)

	udpPort, tcpPort, tlsPort := port(t, at["udp"]), port(t, at["tcp"]), port(t, at["tls"])
	input := "127.0.0.1:" + strconv.Itoa(freePort(t))
	conf := fmt.Sprintf(`
global(workDirectory="%%WORK%%" defaultNetstreamDriverCAFile="%s")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="%d" ruleset="forward")
ruleset(name="forward") {
  action(type="omfwd" name="to-udp" target="127.0.0.1" port="%d" protocol="udp"
         template="RSYSLOG_SyslogProtocol23Format")
  action(type="omfwd" name="to-tcp" target="127.0.0.1" port="%d" protocol="tcp" tcp_framing="octet-counted"
         template="RSYSLOG_SyslogProtocol23Format" queue.type="LinkedList" action.resumeRetryCount="-1")
  action(type="omfwd" name="to-tls" target="127.0.0.1" port="%d" protocol="tcp" tcp_framing="octet-counted"
         streamDriver="gtls" streamDriverMode="1" streamDriverAuthMode="x509/name" streamDriverPermittedPeers="localhost"
         template="RSYSLOG_SyslogProtocol23Format" queue.type="LinkedList" action.resumeRetryCount="-1")
}
`, pki.ca, port(t, input), udpPort, tcpPort, tlsPort)
	startRsyslog(t, conf, input)

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := messages("via-rsyslog", n)
	logger(t, want, "-n", "127.0.0.1", "-P", strconv.Itoa(port(t, input)), "--tcp", "--rfc5424", "-t", "rsapp", "--msgid", "fwd")

	fromRsyslog := func(transport string) func(syslogRecord) bool {
		return func(r syslogRecord) bool { return r.Transport == transport && r.App == "rsapp" }
	}
	metricsURL := "http://" + metricsAddr + "/metrics"
	topic := readTopic(t, b.seeds(), "syslog")
	topic.until("every message over TCP and TLS, and every UDP datagram landed or dropped", 60*time.Second, func(rs []syslogRecord) bool {
		dropped := scrapeCounterOr(t, metricsURL, `millrace_syslog_dropped_total{reason="udp_queue_full"}`)
		return len(matching(rs, fromRsyslog("tcp"))) >= n && len(matching(rs, fromRsyslog("tls"))) >= n &&
			len(matching(rs, fromRsyslog("udp")))+int(dropped) >= n
	})
	for _, transport := range []string{"tcp", "tls"} {
		got := matching(topic.records, fromRsyslog(transport))
		checkOnce(t, "rsyslog over "+transport, got, host, "rsapp", want)
		for _, r := range got {
			if r.MsgID != "fwd" {
				t.Errorf("rsyslog over %s: msgid %q, want fwd", transport, r.MsgID)
			}
		}
	}
	udp := matching(topic.records, fromRsyslog("udp"))
	dropped := scrapeCounterOr(t, metricsURL, `millrace_syslog_dropped_total{reason="udp_queue_full"}`)
	received := scrapeCounterOr(t, metricsURL, `millrace_syslog_received_total{transport="udp"}`)
	t.Logf("UDP: %d landed, %v dropped and counted, %v received", len(udp), dropped, received)
	if len(udp)+int(dropped) != n || int(received) != n {
		t.Errorf("UDP: %d landed + %v counted drops, %v received; want %d sent", len(udp), dropped, received, n)
	}
	sent := map[string]bool{}
	for _, m := range want {
		sent[m] = true
	}
	seen := map[string]int{}
	for _, r := range udp {
		seen[r.Message]++
		if r.Host != host || r.MsgID != "fwd" || r.ParseError != "" || !sent[r.Message] {
			t.Errorf("rsyslog over udp: record %+v, want one of the messages sent", r)
		}
	}
	for m, c := range seen {
		if c != 1 {
			t.Errorf("rsyslog over udp: %q landed %d times", m, c)
		}
	}
}

// port is the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSyslogUnderUp: `millrace up` receives syslog by default; logger sends
// RFC 5424 over TCP and UDP to the endpoints up's banner names. TCP lands
// every message once, UDP lands or counts each, and the audit counts the
// acknowledged messages under their host and app.
func TestSyslogUnderUp(t *testing.T) {
	t.Parallel()
	const n = 10
	dir := t.TempDir()
	kafkaAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg := fmt.Sprintf(`data: %s
broker: {listen: %s}
schema_registry: {enabled: false}
http: {listen: 127.0.0.1:%d, metrics_listen: %s, audit_interval: -1s}
ops_metrics: {interval: -1s}
audit: {interval: 200ms}
syslog: {udp: "127.0.0.1:0", tcp: "127.0.0.1:0"}
otlp: {enabled: false}
sinks:
  - {name: syslog, out: lake, topics: [syslog], schema: syslog, roll_age: 1s, idle_timeout: 1s}
`, filepath.Join(dir, "data"), kafkaAddr, freePort(t), metricsAddr)
	cfgPath := filepath.Join(dir, "millrace.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	up := startProcess(t, "up", "up", "--config", cfgPath)
	up.waitLog("is up", 1, 60*time.Second)
	at := syslogEndpoints(t, up.log(), "  syslog ")
	if at["udp"] == "" || at["tcp"] == "" || at["tls"] != "" {
		t.Fatalf("up's banner names syslog endpoints %v, want udp and tcp", at)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	overTCP, overUDP := messages("logger-tcp", n), messages("logger-udp", n)
	logger(t, overTCP, "-n", "127.0.0.1", "-P", strconv.Itoa(port(t, at["tcp"])), "--tcp", "--rfc5424", "-t", "lgtcp")
	logger(t, overUDP, "-n", "127.0.0.1", "-P", strconv.Itoa(port(t, at["udp"])), "--udp", "--rfc5424", "-t", "lgudp")

	metricsURL := "http://" + metricsAddr + "/metrics"
	topic := readTopic(t, []string{kafkaAddr}, "syslog")
	byApp := func(app string) func(syslogRecord) bool { return func(r syslogRecord) bool { return r.App == app } }
	topic.until("logger's messages over TCP, and over UDP landed or dropped", 60*time.Second, func(rs []syslogRecord) bool {
		dropped := scrapeCounterOr(t, metricsURL, `millrace_syslog_dropped_total{reason="udp_queue_full"}`)
		return len(matching(rs, byApp("lgtcp"))) >= n && len(matching(rs, byApp("lgudp")))+int(dropped) >= n
	})
	checkOnce(t, "logger over tcp", matching(topic.records, byApp("lgtcp")), host, "lgtcp", overTCP)
	udp := matching(topic.records, byApp("lgudp"))
	if dropped := scrapeCounterOr(t, metricsURL, `millrace_syslog_dropped_total{reason="udp_queue_full"}`); len(udp)+int(dropped) != n {
		t.Errorf("logger over udp: %d landed + %v counted drops, want %d", len(udp), dropped, n)
	}

	// The audit: the receiver's count of host/lgtcp is every TCP message,
	// and the sink's rows of that source in the lake are as many.
	source := audit.SyslogSource(host, "lgtcp")
	var line reconcile.Line
	var out string
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%+v in the last audit:\n%s", line, out) })()
	waitfor.Until(t, 60*time.Second, "the audit to count the TCP messages under "+source+", accepted and landed", func() bool {
		var code int
		out, code = runAudit(t, "audit", "-b", kafkaAddr, "--since", "2h", "--json", "--topic", "syslog")
		if code != 0 && code != 1 {
			return false
		}
		line = reconcile.Line{}
		for _, l := range decodeReport(t, out).Lines {
			if l.Source == source {
				line = l
			}
		}
		return line.Accepted == n && line.Landed == n
	})
}
