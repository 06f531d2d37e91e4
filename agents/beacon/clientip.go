package beacon

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
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
