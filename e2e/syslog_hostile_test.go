package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// syslogFloodRSSGrowthKiB bounds what a UDP flood may add to the
// receiver's resident memory: its queue holds udp_queue datagrams of at
// most max_message_bytes, and the producer's buffer is bounded; a receiver
// that queued without bound would hold the whole flood (about 20 MiB here).
const syslogFloodRSSGrowthKiB = 32 << 10

// TestSyslogHostileSenders floods a real `millrace syslog` with UDP
// datagrams as fast as one socket sends them, against a small udp_queue:
// every datagram the receiver read lands or is counted as dropped, those
// it never read are the kernel's (counted host-wide as UDP receive-buffer
// errors), its memory stays bounded, and it keeps serving TCP afterwards.
// Malformed messages land with their raw text and a parse_error.
func TestSyslogHostileSenders(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "syslog", 3, nil)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metricsURL := "http://" + metricsAddr + "/metrics"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "syslog.yaml")
	if err := os.WriteFile(cfg, []byte("syslog:\n  udp_queue: 16\n  max_message_bytes: 2048\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, at := startSyslog(t, b, metricsAddr, "", "--config", cfg)
	rssBefore := procRSSKiB(t, p.pid())
	kernelBefore := scrapeCounterOr(t, metricsURL, "millrace_syslog_kernel_udp_rcvbuf_errors")

	// The flood: 20,000 datagrams of 1 KiB, each a valid message with a
	// host of its own (the audit folds the excess into "(other)").
	const sent = 20_000
	c, err := net.Dial("udp", at["udp"])
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 1000)
	for i := range sent {
		// A refused write (ICMP from an earlier datagram) is not the
		// receiver's to count; the test counts only what was sent.
		if _, err := fmt.Fprintf(c, "<13>1 - flood-%d flood - - - %d %s", i, i, pad); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
	c.Close()

	// Every datagram read is either produced or counted as dropped, once
	// the receiver has read what the kernel held (two scrapes agree).
	var received, dropped, produced float64
	accounted := func() bool {
		before := received
		received = scrapeCounterOr(t, metricsURL, `millrace_syslog_received_total{transport="udp"}`)
		dropped = scrapeCounterOr(t, metricsURL, `millrace_syslog_dropped_total{reason="udp_queue_full"}`)
		produced = scrapeCounterOr(t, metricsURL, "millrace_syslog_produced_total")
		return received > 0 && received == before && produced+dropped == received
	}
	waitfor.Until(t, 60*time.Second, "every datagram read to be produced or counted as dropped", accounted)
	kernel := scrapeCounterOr(t, metricsURL, "millrace_syslog_kernel_udp_rcvbuf_errors") - kernelBefore
	t.Logf("flood of %d: %v read, %v produced, %v dropped at the queue, %v dropped by the kernel (host-wide)", sent, received, produced, dropped, kernel)
	if dropped == 0 && received == sent {
		t.Logf("no datagram was dropped: the producer kept up with the flood")
	}
	if received > sent || sent-received > kernel {
		t.Errorf("%v of %d datagrams were read and the kernel counted %v drops: %v are unaccounted for", received, sent, kernel, float64(sent)-received-kernel)
	}
	peak := peakRSSKiB(t, p.pid())
	t.Logf("receiver RSS %d KiB before, peak %d KiB", rssBefore, peak)
	if peak-rssBefore > syslogFloodRSSGrowthKiB {
		t.Errorf("the flood grew the receiver's RSS by %d KiB (%d to a peak of %d), limit %d KiB", peak-rssBefore, rssBefore, peak, syslogFloodRSSGrowthKiB)
	}

	// Afterwards TCP is served: two well-formed messages and two
	// malformed ones land, the malformed raw with their parse error.
	tcp, err := net.Dial("tcp", at["tcp"])
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	const badVersion = "<34>1 yesterday host app - - - not a timestamp"
	var frames bytes.Buffer
	for _, m := range []string{"<13>1 - after flood - - - still-serving-1", badVersion, "no priority at all", "<13>1 - after flood - - - still-serving-2"} {
		fmt.Fprintf(&frames, "%d %s", len(m), m)
	}
	if _, err := io.Copy(tcp, &frames); err != nil {
		t.Fatal(err)
	}
	topic := readTopic(t, b.seeds(), "syslog")
	overTCP := func(r syslogRecord) bool { return r.Transport == "tcp" }
	topic.until("the four TCP messages after the flood", 60*time.Second, func(rs []syslogRecord) bool {
		return len(matching(rs, overTCP)) >= 4
	})
	raw := map[string]syslogRecord{}
	for _, r := range matching(topic.records, overTCP) {
		if r.ParseError != "" {
			raw[r.Raw] = r
		} else if r.Host != "after" || r.App != "flood" || !strings.HasPrefix(r.Message, "still-serving-") {
			t.Errorf("after the flood: record %+v", r)
		}
	}
	for _, m := range []string{badVersion, "no priority at all"} {
		if r, ok := raw[m]; !ok || r.Message != "" {
			t.Errorf("malformed %q: record %+v, want it raw with a parse_error and no message", m, r)
		}
	}
	if len(raw) != 2 || len(matching(topic.records, overTCP)) != 4 {
		t.Errorf("after the flood: %d TCP records, %d malformed, want 4 and 2", len(matching(topic.records, overTCP)), len(raw))
	}
}
