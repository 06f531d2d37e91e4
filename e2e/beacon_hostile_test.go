package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// beaconRSSGrowthKiB bounds what the attack may add to the beacon's
// resident memory. Each 1 MiB metrics bomb now costs its body and about as
// much again in garbage, where parsing one whole cost 64 MiB of heap (70
// MiB live in the reproduction), so the 4 bombs parsed the old way
// would be far over it, and even one would come close. (It was an absolute
// 96 MiB when a fresh beacon held 32 MiB; an idle beacon now holds about
// 93 MiB, 25 MiB more of it the binary's own pages, so the bound is on the
// growth, which is what the attack costs.)
const beaconRSSGrowthKiB = 32 << 10

// TestBeaconHostileClients puts a real beacon under 8 clients from one IP
// that send their bodies a byte at a time and under 1 MiB /v1/metrics bodies
// of some 75,000 samples each, and checks that POSTs from another client
// keep getting 2xx meanwhile, that the slow bodies are cut with 408 and the
// bombs refused with 413, and that the beacon's memory stays bounded. It
// has 4 processing slots, fewer than the slow clients: a beacon that gave
// slots to requests before their bodies arrived would answer 503 to
// everyone else.
func TestBeaconHostileClients(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	for _, topic := range []string{"clicks", "clicks.dlq", "ops.metrics", "ops.metrics.dlq"} {
		b.createTopic(t, topic, 1, nil)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	bc := startBeacon(t, b, `
beacon:
  topic: clicks
  metrics_listen: `+metricsAddr+`
  max_concurrent_requests: 4
  body_read_timeout: 10s
ship:
  linger: 1ms
`)
	addr := strings.TrimPrefix(bc.url, "http://")
	metricsURL := "http://" + metricsAddr + "/metrics"
	rssBefore := procRSSKiB(t, bc.pid())

	// 8 slow bodies from 127.0.0.1, a byte every 100 ms of a 1,000-byte
	// body: never idle, never done.
	const slowClients = 8
	stop := make(chan struct{})
	var trickling sync.WaitGroup
	slow := make([]net.Conn, slowClients)
	for i := range slow {
		slow[i] = dialFrom(t, "127.0.0.1", addr)
		if _, err := io.WriteString(slow[i], "POST /v1/events HTTP/1.1\r\nHost: beacon\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n["); err != nil {
			t.Fatal(err)
		}
		trickling.Add(1)
		go func(c net.Conn) {
			defer trickling.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte(" ")); err != nil {
						return // the beacon gave up on the body
					}
				}
			}
		}(slow[i])
	}
	defer func() { close(stop); trickling.Wait() }()
	waitfor.Until(t, 10*time.Second, "8 slow bodies in progress", func() bool {
		return scrapeCounter(t, metricsURL, "millrace_beacon_requests_in_progress") == slowClients
	})

	// Metrics bombs from 127.0.0.3, while normal POSTs come from 127.0.0.2.
	var bomb bytes.Buffer
	for i := 0; bomb.Len() < 1<<20-64; i++ {
		fmt.Fprintf(&bomb, "bomb{i=\"%d\"} 1\n", i)
	}
	const bombs = 4
	bombCodes := make(chan int, bombs)
	bomber := clientFrom("127.0.0.3")
	for range bombs {
		go func() {
			resp, err := bomber.Post(bc.url+"/v1/metrics", "text/plain; version=0.0.4", bytes.NewReader(bomb.Bytes()))
			if err != nil {
				bombCodes <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			bombCodes <- resp.StatusCode
		}()
	}
	visitor := clientFrom("127.0.0.2")
	var latencies []time.Duration
	for i := range 10 {
		start := time.Now()
		resp, err := visitor.Post(bc.url+"/v1/events", "application/json", strings.NewReader(fmt.Sprintf(`{"type":"page_view","title":"visitor-%d"}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		latencies = append(latencies, time.Since(start))
		if resp.StatusCode/100 != 2 {
			t.Fatalf("visitor POST %d beside the slow bodies and bombs: %d %s", i, resp.StatusCode, body)
		}
	}
	// The slow bodies were in progress before the visitor's POSTs and still
	// are: every POST above was answered beside them.
	if got := scrapeCounter(t, metricsURL, "millrace_beacon_requests_in_progress"); got < slowClients {
		t.Fatalf("only %v requests in progress after the visitor's POSTs; the slow bodies ended too early", got)
	}
	for range bombs {
		if code := <-bombCodes; code != http.StatusRequestEntityTooLarge {
			t.Errorf("metrics bomb answered %d, want 413", code)
		}
	}
	slices.Sort(latencies)
	t.Logf("visitor POST latency beside %d slow bodies and %d bombs: median %v, max %v", slowClients, bombs, latencies[len(latencies)/2], latencies[len(latencies)-1])

	for i, c := range slow {
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("slow client %d: no answer: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("slow client %d: %d, want 408", i, resp.StatusCode)
		}
	}
	rss := procRSSKiB(t, bc.pid())
	t.Logf("beacon RSS %d KiB before, %d KiB after", rssBefore, rss)
	if rss-rssBefore > beaconRSSGrowthKiB {
		t.Errorf("beacon RSS grew %d KiB in the attack (%d to %d), limit %d KiB", rss-rssBefore, rssBefore, rss, beaconRSSGrowthKiB)
	}
	if got := scrapeCounter(t, metricsURL, "millrace_beacon_requests_in_progress"); got != 0 {
		t.Errorf("%v requests still in progress", got)
	}
}

// dialFrom connects to addr from the loopback address local: every
// 127.0.0.0/8 address is this host, and each is another client to the
// beacon.
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clientFrom is an HTTP client whose connections come from local.
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// procRSSKiB reads a process's resident set size from /proc.
func procRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kib, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
