package zk

import (
	"errors"
	"slices"
	"testing"

	gozk "github.com/go-zookeeper/zk"

	"millrace/broker/coord"
)

func TestParseServers(t *testing.T) {
	cases := []struct {
		in     string
		hosts  []string
		chroot string
		bad    bool
	}{
		{in: "a:1", hosts: []string{"a:1"}},
		{in: "a:1,b:2, c:3", hosts: []string{"a:1", "b:2", "c:3"}},
		{in: "a:1,b:2/kafka/one", hosts: []string{"a:1", "b:2"}, chroot: "/kafka/one"},
		{in: "a:1/", hosts: []string{"a:1"}},
		{in: "", bad: true},
		{in: "a:1,,b:2", bad: true},
		{in: "a:1/x/", bad: true},
		{in: "a:1/x/../y", bad: true},
	}
	for _, tc := range cases {
		hosts, chroot, err := parseServers(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("parseServers(%q) accepted", tc.in)
			}
			continue
		}
		if err != nil || !slices.Equal(hosts, tc.hosts) || chroot != tc.chroot {
			t.Errorf("parseServers(%q) = %q, %q, %v; want %q, %q", tc.in, hosts, chroot, err, tc.hosts, tc.chroot)
		}
	}
}

func TestMapError(t *testing.T) {
	cases := []struct {
		in   error
		want error
	}{
		{gozk.ErrNoNode, coord.ErrNoNode},
		{gozk.ErrNodeExists, coord.ErrNodeExists},
		{gozk.ErrBadVersion, coord.ErrBadVersion},
		{gozk.ErrNotEmpty, coord.ErrNotEmpty},
		{gozk.ErrNoChildrenForEphemerals, coord.ErrEphemeralParent},
		{gozk.ErrInvalidPath, coord.ErrBadPath},
		{gozk.ErrSessionExpired, coord.ErrSessionExpired},
		{gozk.ErrConnectionClosed, ErrConnectionLoss},
		{gozk.ErrNoServer, ErrConnectionLoss},
		{gozk.ErrClosing, ErrConnectionLoss},
	}
	for _, tc := range cases {
		if got := mapError(tc.in); !errors.Is(got, tc.want) {
			t.Errorf("mapError(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	// Unknown errors pass through.
	other := errors.New("other")
	if got := mapError(other); got != other {
		t.Errorf("mapError(other) = %v", got)
	}
}

// Invalid ops are refused before anything is sent, naming the op.
func TestMultiValidatesOps(t *testing.T) {
	s := &Store{}
	err := s.Multi(
		coord.CheckOp{Path: "/ok", Version: 0},
		coord.SetOp{Path: "/ok", Version: 0},
		coord.CreateOp{Path: "/trailing/", Mode: coord.Persistent},
	)
	var multiErr *coord.MultiError
	if !errors.As(err, &multiErr) || multiErr.Index != 2 || !errors.Is(err, coord.ErrBadPath) {
		t.Fatalf("Multi with a bad path: %v", err)
	}
	err = s.Multi(coord.DeleteOp{Path: "relative", Version: 0})
	if !errors.As(err, &multiErr) || multiErr.Index != 0 || !errors.Is(err, coord.ErrBadPath) {
		t.Fatalf("Multi with a relative path: %v", err)
	}
}

func TestParseConnectResponse(t *testing.T) {
	body := []byte{
		0, 0, 0, 0, // protocol version
		0, 0, 0x0f, 0xa0, // timeout 4000
		0, 0, 0, 0, 0, 0, 0x12, 0x34, // session id
		0, 0, 0, 3, 'p', 'w', 'd', // password
		0, // read-only
	}
	id, passwd, ok := parseConnectResponse(body)
	if !ok || id != 0x1234 || string(passwd) != "pwd" {
		t.Fatalf("parseConnectResponse = %#x, %q, %v", id, passwd, ok)
	}
	// A password longer than the frame is malformed, not a panic.
	body[19] = 200
	if _, _, ok := parseConnectResponse(body); ok {
		t.Fatal("oversized password accepted")
	}
	if _, _, ok := parseConnectResponse(body[:10]); ok {
		t.Fatal("short response accepted")
	}
}

func TestChrootMapping(t *testing.T) {
	s := &Store{chroot: "/a/b"}
	cases := []struct {
		path       string
		sequential bool
		full       string
	}{
		{"/", false, "/a/b"},
		{"/", true, "/a/b/"},
		{"/x", false, "/a/b/x"},
		{"/x/", true, "/a/b/x/"},
	}
	for _, tc := range cases {
		if got := s.full(tc.path, tc.sequential); got != tc.full {
			t.Errorf("full(%q, %v) = %q, want %q", tc.path, tc.sequential, got, tc.full)
		}
	}
	if got := s.relative("/a/b"); got != "/" {
		t.Errorf("relative(/a/b) = %q", got)
	}
	if got := s.relative("/a/b/x/0000000001"); got != "/x/0000000001" {
		t.Errorf("relative = %q", got)
	}
}
