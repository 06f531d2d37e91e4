package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzRequest drives the request path — size check, header and body parsing,
// the handler — with arbitrary frames (size prefix included). Every input
// must end in a response whose header echoes the correlation id, or in a
// decision to close the connection; never in a panic or a hang.
//
// Handlers that create topics (CreateTopics, CreatePartitions) are parsed but
// not run: a fuzzed partition count would have the fuzzer create millions of
// partition directories. Metadata auto-creation is off for the same reason.
func FuzzRequest(f *testing.F) {
	seed := func(req kmsg.Request, version int16) {
		req.SetVersion(version)
		f.Add(frame(req, 42))
	}
	for v := int16(0); v <= 4; v++ {
		seed(kmsg.NewPtrApiVersionsRequest(), v)
	}
	for _, v := range []int16{0, 1, 4, 9, 10, 12} {
		m := kmsg.NewPtrMetadataRequest()
		m.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
		seed(m, v)
	}
	for _, v := range []int16{0, 1, 4, 5, 7} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1}}
		seed(ct, v)
	}
	seed(kmsg.NewPtrDeleteTopicsRequest(), 6)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
	seed(dc, 4)
	seed(kmsg.NewPtrIncrementalAlterConfigsRequest(), 1)
	seed(kmsg.NewPtrAlterConfigsRequest(), 2)
	seed(kmsg.NewPtrDescribeClusterRequest(), 1)
	seed(kmsg.NewPtrDescribeLogDirsRequest(), 4)
	seed(kmsg.NewPtrAlterPartitionAssignmentsRequest(), 1)
	seed(kmsg.NewPtrListPartitionReassignmentsRequest(), 0)
	seed(kmsg.NewPtrElectLeadersRequest(), 2)
	seed(kmsg.NewPtrDescribeACLsRequest(), 3)
	seed(kmsg.NewPtrDescribeProducersRequest(), 0)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g"}
	seed(fc, 4)
	seed(kmsg.NewPtrListGroupsRequest(), 4)
	seed(kmsg.NewPtrHeartbeatRequest(), 4)
	seed(kmsg.NewPtrOffsetFetchRequest(), 8)
	f.Add([]byte{0, 0, 0, 10, 0, 18, 0, 9, 0, 0, 0, 1, 0, 0})      // ApiVersions v9
	f.Add([]byte{0, 0, 0, 10, 3, 231, 0, 0, 0, 0, 0, 1, 0, 0})     // unknown key 999
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 18})                   // huge size
	f.Add([]byte{0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0xff}) // truncated body

	tb := startBroker(f, withConfig(func(c *Config) { c.AutoCreateTopics = false }))
	b := tb.broker
	fake := &conn{b: b, host: "127.0.0.1", remote: "127.0.0.1:1"}

	f.Fuzz(func(t *testing.T, data []byte) {
		out, closeErr := fuzzOne(b, fake, data)
		if closeErr != nil {
			var ce *closeError
			if !errors.As(closeErr, &ce) {
				t.Fatalf("a close decision that is not a closeError: %v", closeErr)
			}
			return
		}
		if out == nil {
			return // no response (none of the fuzzed handlers does this today)
		}
		if len(out) < 8 || int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("response frame of %d bytes has size prefix %d", len(out), binary.BigEndian.Uint32(out))
		}
		if got, want := binary.BigEndian.Uint32(out[4:]), binary.BigEndian.Uint32(data[8:]); got != want {
			t.Fatalf("correlation id %d, want %d", got, want)
		}
	})
}

// fuzzOne is the request path of the connection loop for one frame.
func fuzzOne(b *Broker, c *conn, data []byte) ([]byte, error) {
	if len(data) < 4 {
		return nil, closef("truncated size")
	}
	size := int32(binary.BigEndian.Uint32(data))
	if err := checkSize(size, b.cfg.SocketRequestMaxBytes); err != nil {
		return nil, err
	}
	if int(size) != len(data)-4 {
		return nil, closef("truncated frame") // the reader would wait, then close
	}
	r, err := parseRequest(data[4:], DefaultConfig().ClientIDMaxBytes, nil)
	if err != nil {
		return nil, err
	}
	r.conn = c
	if r.key == 19 || r.key == 37 {
		return nil, closef("not run by the fuzz target")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r.unsupportedAPIVersions {
		return encodeResponse(r, unsupportedAPIVersionsResponse()), nil
	}
	return b.serveRequest(ctx, r)
}
