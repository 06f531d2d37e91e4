package beacon

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
)

// ipResolver finds a request's client address.
type ipResolver struct {
	trusted  []netip.Prefix
	truncate bool
}

// isTrusted reports whether a is one of the configured proxies.
func (r *ipResolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the client's address: the socket's peer, unless the
// peer is a trusted proxy, in which case X-Forwarded-For is walked from the
// right (the hop nearest to us) past every trusted proxy, and the first
// address not trusted is the client. Walking from the right matters: the
// left-most entries are whatever the client chose to send, so only entries
// appended by our own proxies can be believed. When every hop is trusted the
// left-most one is the best answer; an unparseable entry stops the walk at
// the last good hop. The zero Addr means the peer could not be parsed (a
// test's fake RemoteAddr).
func (r *ipResolver) clientAddr(req *http.Request) netip.Addr {
	peer := parseHostPort(req.RemoteAddr)
	if !peer.IsValid() || len(r.trusted) == 0 || !r.isTrusted(peer) {
		return peer
	}
	client := peer
	headers := req.Header.Values("X-Forwarded-For")
	for h := len(headers) - 1; h >= 0; h-- {
		parts := strings.Split(headers[h], ",")
		for i := len(parts) - 1; i >= 0; i-- {
			a := parseForwarded(parts[i])
			if !a.IsValid() {
				return client
			}
			client = a
			if !r.isTrusted(a) {
				return client
			}
		}
	}
	return client
}

// display is the address as stored in events: truncated to its /24 or /48
// network when configured.
func (r *ipResolver) display(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	if r.truncate {
		a = truncateAddr(a)
	}
	return a.String()
}

// truncateAddr keeps the network part of an address: /24 for IPv4 and /48
// for IPv6, the usual anonymisation (it still tells the region and the
// provider, not the household).
func truncateAddr(a netip.Addr) netip.Addr {
	bits := 24
	if a.Is6() {
		bits = 48
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return a
	}
	return p.Addr()
}

// parseHostPort parses a RemoteAddr ("1.2.3.4:5678", "[::1]:80").
func parseHostPort(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// parseForwarded parses one X-Forwarded-For entry, which proxies write as a
// bare address, sometimes with a port or in brackets.
func parseForwarded(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	if a := parseHostPort(s); a.IsValid() {
		return a
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}

// clientKey is the client as the rate limit and the per-client cap count
// it: an IPv4 address, or the IPv6 network of v6Prefix leading bits (one
// host or household usually holds a whole /64 and can send from any
// address in it).
func clientKey(a netip.Addr, v6Prefix int) netip.Addr {
	if !a.Is6() {
		return a
	}
	p, err := a.Prefix(v6Prefix)
	if err != nil { // v6Prefix is validated to 32..128
		return a
	}
	return p.Addr()
}

// clientSlots counts each client's requests in progress, to cap them. The
// map holds only clients with a request in progress, so its size is
// bounded by the connections being served.
type clientSlots struct {
	max int

	mu    sync.Mutex // guards the following
	inUse map[netip.Addr]int
}

func newClientSlots(maxPerClient int) *clientSlots {
	return &clientSlots{max: maxPerClient, inUse: make(map[netip.Addr]int)}
}

// acquire takes one of k's slots; false when k already holds all of them.
func (c *clientSlots) acquire(k netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inUse[k] >= c.max {
		return false
	}
	c.inUse[k]++
	return true
}

// release gives back a slot taken by acquire.
func (c *clientSlots) release(k netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.inUse[k] - 1; n > 0 {
		c.inUse[k] = n
	} else {
		delete(c.inUse, k)
	}
}

// total is the number of requests in progress over all clients.
func (c *clientSlots) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.inUse {
		n += v
	}
	return n
}
