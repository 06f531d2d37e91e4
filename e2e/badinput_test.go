package e2e

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Bad input closes only the offending connection, with a log line, while the
// broker keeps serving a client that is working at the same time.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "steady", 1, nil)
	producer := b.client(t, kgo.DefaultProduceTopic("steady"))
	ctx := context.Background()

	// Random bytes that claim a request of 16-32 MiB (within
	// socket.request.max.bytes) and end after 4 KiB. Left open, such a
	// connection is only slow, and the broker waits for the rest as Kafka
	// does; the case closes its write side so the broker sees the request
	// cut short. (Unpinned, the length prefix fell in range about once in 40
	// runs and the case waited out its deadline.)
	garbage := make([]byte, 4096)
	rand.Read(garbage)
	garbage[0] = 0x01
	apiVersionsHeader := func(key int16) []byte {
		// request header v1: api key, version, correlation id, client id
		h := binary.BigEndian.AppendUint16(nil, uint16(key))
		h = binary.BigEndian.AppendUint16(h, 0)
		h = binary.BigEndian.AppendUint32(h, 7)
		return binary.BigEndian.AppendUint16(h, 0xffff) // null client id
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}

	cases := []struct {
		name    string
		send    []byte
		halfEOF bool   // close our write side after sending
		logHint string // what the broker's log line must mention
	}{
		{"random bytes", garbage, true, "closing connection"},
		{"huge length prefix", []byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 0}, false, "closing connection"},
		{"negative length prefix", []byte{0xff, 0xff, 0xff, 0xf0}, false, "closing connection"},
		{"truncated frame", frame(apiVersionsHeader(18))[:9], true, ""},
		{"unknown api key", frame(apiVersionsHeader(999)), false, "999"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rssBefore := rssKiB(t, b)
			nc, err := net.Dial("tcp", b.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Write(c.send); err != nil {
				t.Fatal(err)
			}
			if c.halfEOF {
				nc.(*net.TCPConn).CloseWrite()
			}
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, nc)
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("reading after bad input: %v", err)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("broker kept the connection open after bad input")
			}
			if n != 0 {
				t.Errorf("broker answered %d bytes to bad input; want the connection closed", n)
			}
			// Meanwhile everyone else is served.
			r := &kgo.Record{Value: []byte("after " + c.name)}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("a good client failed after %s: %v", c.name, err)
			}
			if r.Offset != int64(i) {
				t.Errorf("record offset %d, want %d", r.Offset, i)
			}
			if c.logHint != "" && !strings.Contains(b.log(), c.logHint) {
				t.Errorf("broker log has no line mentioning %q", c.logHint)
			}
			// A length prefix is never trusted with memory.
			if grew := rssKiB(t, b) - rssBefore; grew > 64<<10 {
				t.Errorf("broker RSS grew by %d KiB handling %s", grew, c.name)
			}
		})
	}
}

func rssKiB(t *testing.T, b *broker) int {
	t.Helper()
	rss, err := b.rssKiB()
	if err != nil {
		t.Fatal(err)
	}
	return rss
}

// rssKiB reads the broker process's resident set size from /proc.
func (b *broker) rssKiB() (int, error) {
	b.mu.Lock()
	pid := b.cmd.Process.Pid
	b.mu.Unlock()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
