package kafka

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// TestConnectionLimits: a connection over max.connections or
// max.connections.per.ip (or its override) is closed at once and counted;
// a slot freed by a closing connection is usable again.
func TestConnectionLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     func(*Config)
		allowed int
		limit   string
	}{
		{"per ip", func(c *Config) { c.MaxConnectionsPerIP = 3 }, 3, "max.connections.per.ip"},
		{"per ip override", func(c *Config) {
			c.MaxConnectionsPerIP = 3
			c.MaxConnectionsPerIPOverrides = map[string]int{"127.0.0.1": 5}
		}, 5, "max.connections.per.ip"},
		{"total", func(c *Config) { c.MaxConnections = 2 }, 2, "max.connections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			tb := startBroker(t, withConfig(tc.cfg), withMetrics(reg))
			var open []*rawClient
			for i := 0; i < tc.allowed; i++ {
				c := dial(t, tb.addr)
				c.apiVersionsOK(1)
				open = append(open, c)
			}
			dial(t, tb.addr).expectClosed()
			refused := tb.broker.metrics.refused.WithLabelValues(tc.limit)
			if n := testutil.ToFloat64(refused); n != 1 {
				t.Errorf("%s refusals counted: %v, want 1", tc.limit, n)
			}
			if !strings.Contains(tb.logOut.String(), "refusing connections over a limit") {
				t.Errorf("no log line for the refused connection")
			}
			open[0].nc.Close()
			waitfor.Until(t, 10*time.Second, "the closed connection is still counted", func() bool {
				return tb.broker.admission.open() < tc.allowed
			})
			dial(t, tb.addr).apiVersionsOK(2)
		})
	}
}

// TestStalledFramesAreClosedAtTheirDeadline: 2,000 connections that send a
// size prefix and nothing more hold a few KiB each, and are closed once
// millrace.request.read.timeout.ms passes, however long
// connections.max.idle.ms is; their goroutines are gone.
func TestStalledFramesAreClosedAtTheirDeadline(t *testing.T) {
	const conns = 2000
	tb := startBroker(t, withConfig(func(c *Config) {
		c.MaxConnections, c.MaxConnectionsPerIP = conns+1, conns+1
		c.RequestReadTimeout = 3 * time.Second
	}))
	dial(t, tb.addr).apiVersionsOK(1)
	idleGoroutines := runtime.NumGoroutine()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	clients := make([]*rawClient, conns)
	for i := range clients {
		clients[i] = dial(t, tb.addr)
		clients[i].send(sizePrefix(100 << 20))
	}
	// All are held at once: the frame deadline is longer than dialling.
	waitfor.Until(t, 3*time.Second, "not every stalled connection was accepted", func() bool {
		return tb.broker.admission.open() == conns+1
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Each holds its first frame chunk (frameClassMin) and two goroutines;
	// the client ends live in this process too.
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 64<<20 {
		t.Errorf("%d stalled size prefixes hold %d MiB of heap", conns, grown>>20)
	}
	t.Logf("%d stalled connections: %d goroutines (from %d), heap in use +%d KiB", conns, runtime.NumGoroutine(), idleGoroutines, (int64(after.HeapInuse)-int64(before.HeapInuse))>>10)
	waitfor.Until(t, 10*time.Second, "stalled connections still open after their frame deadline", func() bool {
		return tb.broker.admission.open() == 1
	})
	waitfor.Until(t, 10*time.Second, "goroutines of stalled connections left", func() bool {
		return runtime.NumGoroutine() <= idleGoroutines+10
	})
	clients[0].expectClosed()
	if !strings.Contains(tb.logOut.String(), "request not complete within millrace.request.read.timeout.ms") {
		t.Errorf("no log line names the frame deadline")
	}
}

// TestControlRequestSizeAndDecodeBound: a Metadata frame larger than
// millrace.control.request.max.bytes closes the connection after its first
// chunk; an array-count bomb within the limit costs what
// requestDecodeFactor accounts for, not hundreds of MiB.
func TestControlRequestSizeAndDecodeBound(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.AutoCreateTopics = false }))
	// metadataBomb is a Metadata v0 frame of size bytes: a topic count
	// filling the frame with empty names, the most elements per byte.
	metadataBomb := func(size int) []byte {
		b := append(sizePrefix(int32(size)), header(3, 0, 1, "bomb")...)
		n := (size + 4 - len(b) - 4) / 2
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		return append(b, make([]byte, 2*n)...)
	}
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}

	big := metadataBomb(20 << 20) // the size of the reproduction
	got := allocated(func() {
		c := dial(t, tb.addr)
		c.send(big[:4+frameClassMin])
		c.expectClosed()
	})
	if got > 8<<20 {
		t.Errorf("a refused 20 MiB Metadata frame allocated %d MiB", got>>20)
	}
	if !strings.Contains(tb.logOut.String(), "larger than millrace.control.request.max.bytes") {
		t.Errorf("no log line names millrace.control.request.max.bytes")
	}

	within := metadataBomb(int(DefaultConfig().ControlRequestMaxBytes))
	got = allocated(func() {
		c := dial(t, tb.addr)
		c.send(within)
		if _, _, err := c.readFrame(); err != nil {
			t.Fatalf("no answer to a Metadata request within the limit: %v", err)
		}
	})
	t.Logf("a %d KiB Metadata count bomb allocated %d MiB", len(within)>>10, got>>20)
	if got > 96<<20 {
		t.Errorf("a %d KiB Metadata request allocated %d MiB", len(within)>>10, got>>20)
	}
	dial(t, tb.addr).apiVersionsOK(2)
}

// TestRequestBudgetBackpressure: while one connection holds the request
// byte budget with a frame it has not finished sending, another's request
// is not read; it is answered once the first is answered.
func TestRequestBudgetBackpressure(t *testing.T) {
	const budget = 64 << 10
	tb := startBroker(t, withConfig(func(c *Config) {
		c.SocketRequestMaxBytes, c.QueuedMaxRequestBytes = budget, budget
	}))
	tb.createTopic("budget", 1, nil)

	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "budget"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = makeBatch(t, plainBatch(strings.Repeat("x", budget-2<<10)))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	produce := frame(req, 1)
	holder := dial(t, tb.addr)
	holder.send(produce[:len(produce)-100])
	waitfor.Until(t, 10*time.Second, "the unfinished frame holds no budget", func() bool {
		return tb.broker.budget.used.Load() >= int64(len(produce))-4-(4<<10)
	})

	// ApiVersions with a long software name: its decode charge
	// (requestDecodeFactor times its size) exceeds the budget left.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "waiting-"+strings.Repeat("n", 100), "1"
	waiter := dial(t, tb.addr)
	waiter.send(frame(av, 7))
	waiter.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := waiter.nc.Read(make([]byte, 1)); n > 0 {
		t.Fatalf("a request was answered while the budget was taken")
	}

	holder.send(produce[len(produce)-100:])
	if sp := holder.readResponse(req, 1).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; sp.ErrorCode != 0 {
		t.Fatalf("produce: error %d", sp.ErrorCode)
	}
	if resp := waiter.readResponse(av, 7).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions after the budget freed: error %d", resp.ErrorCode)
	}
	waitfor.Until(t, 10*time.Second, "budget still held after every request was answered", func() bool {
		return tb.broker.budget.used.Load() == 0
	})
}

// TestFetchMaxWaitCapped: a Fetch asking to wait a minute for data that
// never comes is answered after millrace.fetch.max.wait.ms.
func TestFetchMaxWaitCapped(t *testing.T) {
	const capped = 200 * time.Millisecond
	tb := startBroker(t, withConfig(func(c *Config) { c.FetchMaxWait = capped }))
	tb.createTopic("quiet", 1, nil)
	c := dial(t, tb.addr)
	start := time.Now()
	resp := c.roundTrip(fetchRequest(11, time.Minute, 1, 1<<20, fetchPart{topic: "quiet", maxBytes: 1 << 20}), 1).(*kmsg.FetchResponse)
	took := time.Since(start)
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("fetch: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	// Answered at all: the test connection's read deadline (10 s) is far
	// below the minute asked for.
	if took < capped {
		t.Fatalf("a fetch of max wait 1m capped at %v was answered after %v", capped, took)
	}
}

// TestClientIDLimit: a client ID up to millrace.client.id.max.bytes is
// served, a longer one closes the connection with a log line.
func TestClientIDLimit(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.ClientIDMaxBytes = 64 }))
	apiVersions := func(clientID string) []byte {
		return kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	}
	ok := dial(t, tb.addr)
	ok.send(apiVersions(strings.Repeat("c", 64)))
	if _, _, err := ok.readFrame(); err != nil {
		t.Fatalf("a 64-byte client ID was not served: %v", err)
	}
	long := dial(t, tb.addr)
	long.send(apiVersions(strings.Repeat("c", 65)))
	long.expectClosed()
	if !strings.Contains(tb.logOut.String(), "client id of 65 bytes is longer than millrace.client.id.max.bytes 64") {
		t.Errorf("no log line names the client ID limit")
	}
}

// TestConnectionLimitSettings: the settings go through Set by their Kafka
// names and Validate refuses what cannot work.
func TestConnectionLimitSettings(t *testing.T) {
	cfg := DefaultConfig()
	for name, value := range map[string]string{
		"max.connections":                    "50",
		"max.connections.per.ip":             "7",
		"max.connections.per.ip.overrides":   "127.0.0.1:100, ::1:20",
		"queued.max.request.bytes":           "209715200",
		"millrace.request.read.timeout.ms":   "5000",
		"millrace.control.request.max.bytes": "4096",
		"millrace.fetch.max.wait.ms":         "1000",
		"millrace.client.id.max.bytes":       "300",
	} {
		if err := cfg.Set(name, value); err != nil {
			t.Fatalf("Set(%s): %v", name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Values()["max.connections.per.ip.overrides"]; got != "127.0.0.1:100,::1:20" {
		t.Errorf("overrides read back as %q", got)
	}
	if cfg.MaxConnections != 50 || cfg.MaxConnectionsPerIP != 7 || cfg.QueuedMaxRequestBytes != 200<<20 ||
		cfg.RequestReadTimeout != 5*time.Second || cfg.ControlRequestMaxBytes != 4096 || cfg.FetchMaxWait != time.Second || cfg.ClientIDMaxBytes != 300 {
		t.Errorf("settings not applied: %+v", cfg)
	}
	if err := cfg.Set("max.connections.per.ip.overrides", "localhost"); err == nil {
		t.Errorf("an override without a count was accepted")
	}
	for _, bad := range []struct{ name, value, complaint string }{
		{"max.connections", "0", "max.connections 0 must be at least 1"},
		{"max.connections.per.ip", "-1", "max.connections.per.ip -1 must be at least 1"},
		{"max.connections.per.ip.overrides", "db.example:5", "not an IP address"},
		{"queued.max.request.bytes", "1000", "at least socket.request.max.bytes"},
		{"millrace.request.read.timeout.ms", "0", "must be positive"},
		{"millrace.control.request.max.bytes", "5", "cannot hold a request header"},
		{"millrace.fetch.max.wait.ms", "-1", "must not be negative"},
		{"millrace.client.id.max.bytes", "-1", "must not be negative"},
	} {
		c := DefaultConfig()
		if err := c.Set(bad.name, bad.value); err != nil {
			t.Fatalf("Set(%s=%s): %v", bad.name, bad.value, err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), bad.complaint) {
			t.Errorf("%s=%s: Validate said %v, want %q", bad.name, bad.value, err, bad.complaint)
		}
	}
	unbounded := DefaultConfig()
	unbounded.QueuedMaxRequestBytes = -1
	if err := unbounded.Validate(); err != nil {
		t.Errorf("queued.max.request.bytes -1: %v", err)
	}
}

// TestProduceStructureBytes: for Produce requests of every served version,
// the bytes besides the record batches are what kmsg encodes around them;
// a request made of many partitions with tagged fields and no records is
// all structure; a truncated one is refused.
func TestProduceStructureBytes(t *testing.T) {
	batch := makeBatch(t, plainBatch("a", "b"))
	for version := int16(3); version <= 13; version++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		txn := "txn"
		req.TransactionID, req.Acks, req.TimeoutMillis = &txn, -1, 1000
		for _, topic := range []string{"one", "two"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, [16]byte{1}
			for p := int32(0); p < 3; p++ {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition, rp.Records = p, batch
				if p == 2 {
					rp.Records = nil
				}
				if version >= 9 {
					rp.UnknownTags.Set(7, []byte("tag"))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		body := req.AppendTo(nil)
		got, err := produceStructureBytes(body, version, req.IsFlexible())
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if want := len(body) - 4*len(batch); got != want {
			t.Errorf("v%d: %d structure bytes, want %d", version, got, want)
		}
		if _, err := produceStructureBytes(body[:len(body)-1], version, req.IsFlexible()); err == nil {
			t.Errorf("v%d: a truncated request was measured", version)
		}
	}
}

// TestProduceStructureLimit: a Produce request whose partitions carry
// tagged fields and no records (each decodes to a map) is refused when that
// part is larger than millrace.control.request.max.bytes, before decoding.
func TestProduceStructureLimit(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.ControlRequestMaxBytes = 64 << 10 }))
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bomb"
	for p := int32(0); p < 20000; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.UnknownTags.Set(1, nil)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	c := dial(t, tb.addr)
	c.send(frame(req, 1))
	c.expectClosed()
	if !strings.Contains(tb.logOut.String(), "besides record batches is more than millrace.control.request.max.bytes") {
		t.Errorf("no log line names millrace.control.request.max.bytes")
	}
}

// FuzzProduceStructureBytes: any body is measured or refused without a
// panic, and the measure is within the body.
func FuzzProduceStructureBytes(f *testing.F) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Records: []byte("records")})
	req.Topics = append(req.Topics, rt)
	f.Add(req.AppendTo(nil), int16(9))
	f.Fuzz(func(t *testing.T, body []byte, version int16) {
		n, err := produceStructureBytes(body, version, version >= 9)
		if err == nil && (n < 0 || n > len(body)) {
			t.Fatalf("%d structure bytes in a body of %d", n, len(body))
		}
	})
}
