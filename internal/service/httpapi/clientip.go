package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Proxies says which proxies stand in front of the API, and so which
// X-Forwarded-For entries it believes (doc/edge.md). A proxy such as nginx
// (proxy_add_x_forwarded_for) or a cloud load balancer appends the address
// that connected to it: the entries on the left are whatever the client
// sent, and only the ones the proxies appended, on the right, are true.
// The zero value trusts no proxy: the client is the connection's peer.
type Proxies struct {
	// Trusted are the addresses of the proxies. A request whose peer is
	// one of them has its client read from X-Forwarded-For, from the
	// right: the first entry that is not a trusted proxy (or the leftmost,
	// when all are).
	Trusted []netip.Prefix
	// Hops is how many proxies every request passes, each appending to
	// X-Forwarded-For: the client is the Hops-th entry from the right,
	// whoever the peer is. Only for an API that no client reaches but
	// through them. Not set with Trusted.
	Hops int
}

// LoopbackProxies trusts a proxy on the same machine only.
var LoopbackProxies = Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

// Enabled reports whether any X-Forwarded-For entry is ever believed.
func (p Proxies) Enabled() bool { return p.Hops > 0 || len(p.Trusted) > 0 }

// ClientIP is the address of the client of a request that came from
// remoteAddr (http.Request.RemoteAddr, host:port) carrying the
// X-Forwarded-For header lines xff, in their order (lines are one list,
// as RFC 9110 reads repeated fields). An entry that is not an address
// (a proxy that passes the header on without appending, a client's junk)
// stops the walk: the client is then the nearest address known, the
// entry to its right or the peer.
func (p Proxies) ClientIP(remoteAddr string, xff []string) string {
	peer, ok := peerAddr(remoteAddr)
	if !ok {
		return peerHost(remoteAddr)
	}
	if !p.Enabled() || len(xff) == 0 {
		return peer.String()
	}
	entries := forwardedFor(xff)
	if p.Hops > 0 {
		if len(entries) < p.Hops { // it did not pass every proxy: believe none
			return peer.String()
		}
		entries = entries[len(entries)-p.Hops:]
	} else if !p.trusts(peer) {
		return peer.String()
	}
	known := peer
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := parseEntry(entries[i])
		if !ok {
			return known.String()
		}
		known = a
		if p.Hops == 0 && !p.trusts(a) {
			break
		}
	}
	return known.String()
}

// FromProxy reports whether the request's peer is a proxy the API
// trusts, whose X-Forwarded-* headers it believes.
func (p Proxies) FromProxy(remoteAddr string) bool {
	if p.Hops > 0 {
		return true
	}
	peer, ok := peerAddr(remoteAddr)
	return ok && p.trusts(peer)
}

func (p Proxies) trusts(a netip.Addr) bool {
	return slices.ContainsFunc(p.Trusted, func(pr netip.Prefix) bool { return pr.Contains(a) })
}

// forwardedFor splits the header's lines into entries, trimmed.
func forwardedFor(lines []string) []string {
	var out []string
	for _, l := range lines {
		for e := range strings.SplitSeq(l, ",") {
			out = append(out, strings.TrimSpace(e))
		}
	}
	return out
}

// parseEntry reads an X-Forwarded-For entry: an address, with or without a
// port ("203.0.113.5", "203.0.113.5:41234", "2001:db8::1",
// "[2001:db8::1]:41234"), as some load balancers write them.
func parseEntry(e string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(e); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(e); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	if inner, ok := strings.CutPrefix(e, "["); ok {
		if inner, ok = strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil {
				return a.WithZone("").Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

func peerAddr(remoteAddr string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(peerHost(remoteAddr))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

func peerHost(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// clientIP is the caller's address, as Config.Proxies reads it.
func (s *Server) clientIP(r *http.Request) string {
	return s.cfg.Proxies.ClientIP(r.RemoteAddr, r.Header.Values("X-Forwarded-For"))
}

// IPv6LimitBits is the length of the IPv6 prefix a per-address limit
// counts as one client: a /64 is the least a network gives one host (or
// one home), and the host picks addresses in it at will (SLAAC, privacy
// addresses), so counting its addresses one by one would let it through
// any limit.
const IPv6LimitBits = 64

// LimitAddress is what the per-address limits count a client at address
// client (ClientIP's answer) under (doc/edge.md): an IPv4 address as it
// is, an IPv4-mapped IPv6 address as its IPv4 address, and any other IPv6
// address as its /64, written as a prefix ("2001:db8:1:2::/64"). What is
// no address (a Unix socket's peer) is kept as it is. Logs and the replay
// keys keep the whole address.
func LimitAddress(client string) string {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return client
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, IPv6LimitBits).Masked().String()
}

// limitAddress is the caller's address as the per-address limits count it.
func (s *Server) limitAddress(r *http.Request) string { return LimitAddress(s.clientIP(r)) }
