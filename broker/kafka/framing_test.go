package kafka

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/group"

	"millrace/internal/waitfor"
)

func sizePrefix(n int32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return b[:]
}

// header builds a raw request header: key, version, correlation id, client id.
func header(key, version int16, correlationID int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	return append(b, clientID...)
}

func framed(body []byte) []byte { return append(sizePrefix(int32(len(body))), body...) }

// TestBadFramesCloseOnlyTheirConnection sends each kind of bad frame on its
// own connection and checks that the broker closes that connection, logs the
// client's address and the reason, and keeps serving a bystander connection
// opened before and a new one opened after.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.SocketRequestMaxBytes = 4096 }))

	metadataV1 := header(3, 1, 7, "c")
	cases := []struct {
		name   string
		bytes  []byte
		reason string // expected in the log line
		// halfClose ends the client's sending side after the bytes, so a
		// truncated frame is seen as truncated rather than as slow.
		halfClose bool
	}{
		{"size below header minimum", append(sizePrefix(5), 1, 2, 3, 4, 5), "outside 10 to 4096", false},
		{"negative size", sizePrefix(-1), "request size -1", false},
		{"huge length prefix", sizePrefix(0x7fffffff), "request size 2147483647", false},
		{"size above socket.request.max.bytes", sizePrefix(4097), "request size 4097", false},
		{"unknown api key", framed(header(999, 0, 1, "c")), "unknown or unserved API key 999", false},
		{"version above served range", framed(header(3, 99, 1, "c")), "API key 3 version 99 is outside", false},
		{"negative version", framed(header(3, -1, 1, "c")), "API key 3 version -1 is outside", false},
		{"client id longer than frame", framed(append(binary.BigEndian.AppendUint16(header(3, 1, 1, "")[:8], 20), 'a', 'b')), "malformed client id", false},
		{"malformed client id length", framed(append(binary.BigEndian.AppendUint16(header(3, 1, 1, "")[:8], 0xfff0), 0, 0, 0, 0)), "malformed client id", false},
		{"malformed body", framed(append(metadataV1, 0x7f, 0xff, 0xff, 0xff)), "malformed request body", false},
		{"truncated frame", append(sizePrefix(100), header(18, 0, 1, "c")...), "reading a request of 100 bytes", true},
	}
	bystander := dial(t, tb.addr)
	bystander.apiVersionsOK(1)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := dial(t, tb.addr)
			bad.send(tc.bytes)
			if tc.halfClose {
				bad.nc.(interface{ CloseWrite() error }).CloseWrite()
			}
			bad.expectClosed()
			waitfor.Until(t, 5*time.Second, "a log line naming the closed connection", func() bool {
				return strings.Contains(tb.logOut.String(), bad.nc.LocalAddr().String())
			})
			var line string
			for _, l := range strings.Split(tb.logOut.String(), "\n") {
				if strings.Contains(l, "remote="+bad.nc.LocalAddr().String()) && strings.Contains(l, "closing connection") {
					line = l
				}
			}
			if line == "" || !strings.Contains(line, tc.reason) {
				t.Fatalf("no log line naming %s with reason %q; log:\n%s", bad.nc.LocalAddr(), tc.reason, tb.logOut.String())
			}
			bystander.apiVersionsOK(int32(100 + i))
			dial(t, tb.addr).apiVersionsOK(1)
		})
	}
}

// TestLargeSizePrefixDoesNotAllocate announces a frame just under the limit
// and sends only a few bytes of it: the broker must not allocate the
// announced size up front.
func TestLargeSizePrefixDoesNotAllocate(t *testing.T) {
	tb := startBroker(t)
	const announced = 100 << 20 // the default socket.request.max.bytes is 104857600
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := dial(t, tb.addr)
	c.send(append(sizePrefix(announced), header(18, 0, 1, "c")...))
	// A round trip on another connection shows the broker has read the
	// frame start by now (connections are independent, so also wait a bit:
	// nothing to wait for shows that the broker did NOT allocate, so the
	// sleep gives it time to have done so if it were going to).
	dial(t, tb.addr).apiVersionsOK(1)
	time.Sleep(100 * time.Millisecond)
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > announced/4 {
		t.Fatalf("allocated %d bytes while a %d-byte frame was announced but not sent", grown, announced)
	}
	c.nc.Close()
}

func TestApiVersions(t *testing.T) {
	tb := startBroker(t)
	c := dial(t, tb.addr)

	check := func(resp *kmsg.ApiVersionsResponse) {
		t.Helper()
		if resp.ErrorCode != 0 {
			t.Fatalf("error code %d", resp.ErrorCode)
		}
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		for key, want := range map[int16][2]int16{18: {0, 4}, 3: {0, 12}, 19: {0, 7}, 20: {0, 6}, 32: {0, 4}, 10: {0, 4}, 60: {0, 1}} {
			if got[key] != want {
				t.Errorf("key %d: versions %v, want %v", key, got[key], want)
			}
		}
		if len(resp.ApiKeys) != len(registry) {
			t.Errorf("%d keys advertised, registry has %d", len(resp.ApiKeys), len(registry))
		}
	}

	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.SetVersion(0)
	check(c.roundTrip(v0, 1).(*kmsg.ApiVersionsResponse))

	// v3 is flexible: the request has a v2 header with tags; the response
	// header is still v0 (readResponse decodes the body right after the
	// correlation id for ApiVersions and would fail on a tag byte).
	v3 := kmsg.NewPtrApiVersionsRequest()
	v3.SetVersion(3)
	v3.ClientSoftwareName, v3.ClientSoftwareVersion = "kgo", "1.0"
	check(c.roundTrip(v3, 2).(*kmsg.ApiVersionsResponse))

	// A version above the served range: error 35 in a v0 body that still
	// lists what is served (KIP-511), and the connection stays usable.
	c.send(framed(append(header(18, 9, 3, "c"), 0xde, 0xad)))
	id, body, err := c.readFrame()
	if err != nil || id != 3 {
		t.Fatalf("unsupported version: correlation %d, err %v", id, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding the v0 error body: %v", err)
	}
	if resp.ErrorCode != 35 {
		t.Fatalf("error code %d, want 35 (UNSUPPORTED_VERSION)", resp.ErrorCode)
	}
	found := false
	for _, k := range resp.ApiKeys {
		found = found || k.ApiKey == 18 && k.MaxVersion == 4
	}
	if !found {
		t.Fatalf("the error response does not list ApiVersions 0-4: %+v", resp.ApiKeys)
	}
	c.apiVersionsOK(4)
}

// TestPipelinedResponsesInOrder sends requests without reading; a blocking
// JoinGroup that completes last must still be answered first.
func TestPipelinedResponsesInOrder(t *testing.T) {
	// The initial rebalance delay holds the JoinGroup response back while the
	// requests behind it are served.
	gcfg := group.DefaultConfig()
	gcfg.InitialRebalanceDelay = 200 * time.Millisecond
	tb := startBroker(t, withGroupConfig(gcfg))
	c := dial(t, tb.addr)

	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3) // before v4 no member-id round trip: it waits for the rebalance
	join.Group, join.ProtocolType = "pipeline-group", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 6000, 300
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	join.Protocols = append(join.Protocols, proto)

	apiv := kmsg.NewPtrApiVersionsRequest()
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	cluster := kmsg.NewPtrDescribeClusterRequest()

	reqs := []kmsg.Request{join, apiv, meta, cluster, apiv, meta}
	var out []byte
	for i, r := range reqs {
		out = append(out, frame(r, int32(i+10))...)
	}
	c.send(out)
	for i, r := range reqs {
		resp := c.readResponse(r, int32(i+10))
		if jr, ok := resp.(*kmsg.JoinGroupResponse); ok && jr.ErrorCode != 0 {
			t.Fatalf("JoinGroup error %d", jr.ErrorCode)
		}
	}
}

// TestNoResponse checks that a handler returning noResponse (acks=0
// Produce) sends nothing, and the next request is still answered.
func TestNoResponse(t *testing.T) {
	const key = 57 // UpdateFeatures: not served by millrace, borrowed here
	if registry[key] != nil {
		t.Fatalf("key %d is served now; pick another for this test", key)
	}
	called := make(chan struct{}, 1)
	registry[key] = &apiEntry{key: key, min: 0, max: 0, handle: func(context.Context, *Broker, *request) (kmsg.Response, error) {
		called <- struct{}{}
		return noResponse, nil
	}}
	t.Cleanup(func() { delete(registry, key) })
	tb := startBroker(t)
	c := dial(t, tb.addr)

	silent := kmsg.NewPtrUpdateFeaturesRequest()
	apiv := kmsg.NewPtrApiVersionsRequest()
	c.send(append(frame(silent, 1), frame(apiv, 2)...))
	c.readResponse(apiv, 2) // fails if the silent request got a response (id 1)
	<-called
}
