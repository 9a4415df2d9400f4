package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/eisland/isle/internal/service/httpapi"
)

// The API's edge (doc/edge.md): which proxies in front of it it believes
// about the client's address, and where its metrics are served.

// APIOpsAddrDefault is where the API serves /healthz and /metrics for the
// machine's own probes and scrapers.
const APIOpsAddrDefault = "127.0.0.1:9093"

// proxyHopsMax bounds API_TRUSTED_PROXY_HOPS: no real path has more.
const proxyHopsMax = 16

func apiOpsAddr(l *loader) string {
	return l.OptionalAddr("API_OPS_ADDR", APIOpsAddrDefault,
		"Address of the API's /metrics and operations /healthz (and /debug/pprof/ with PPROF_ENABLED); empty to serve none. "+opsAddrDoc("9093")+
			" The API's own address serves /healthz and /readyz, and /metrics only with API_METRICS_PUBLIC.")
}

func apiMetricsPublic(l *loader) bool {
	return l.Bool("API_METRICS_PUBLIC", false,
		"Serve /metrics on API_ADDR too, to every client. Off by default: the metrics show routes, statuses and the runtime, for the operator's scraper on API_OPS_ADDR.")
}

// loadProxies reads which X-Forwarded-For entries the API believes
// (httpapi.Proxies), and whether that came from the deprecated
// API_TRUST_PROXY (cmd/api then logs a warning).
func loadProxies(l *loader) (p httpapi.Proxies, deprecated bool) {
	list := l.List("API_TRUSTED_PROXIES", nil,
		"Addresses of the proxies in front of the API (CIDRs or single addresses, comma-separated, e.g. 10.0.0.5,192.0.2.0/28) that append the address they saw to X-Forwarded-For, as nginx's proxy_add_x_forwarded_for and cloud load balancers do. "+
			"A request from one has its client address (rate limits, replay keys, logs) read from X-Forwarded-For from the right: the first entry that is not one of these; the entries a client writes on the left never count. "+
			"Empty: the client is the connection's peer, X-Forwarded-For is ignored. List no range clients connect from (doc/edge.md).")
	hops := l.Int("API_TRUSTED_PROXY_HOPS", 0, 0, proxyHopsMax,
		"Instead of API_TRUSTED_PROXIES: how many proxies, each appending to X-Forwarded-For, every request passes; the client is that many entries from the right. "+
			"Only for an API that no client can reach but through them. 0: not used.")
	trustAll := l.Bool("API_TRUST_PROXY", false,
		"Deprecated: true is API_TRUSTED_PROXIES=127.0.0.0/8,::1 (a proxy on the same machine), with a warning at start. "+
			"It took the leftmost X-Forwarded-For entry, which the client writes; behind a proxy on another machine, set API_TRUSTED_PROXIES instead.")
	for _, item := range list {
		pr, err := parseProxy(item)
		if err != nil {
			l.failf("API_TRUSTED_PROXIES", item, "%v", err)
			continue
		}
		p.Trusted = append(p.Trusted, pr)
	}
	p.Hops = hops
	switch {
	case len(list) > 0 && hops > 0:
		l.failf("API_TRUSTED_PROXY_HOPS", strconv.Itoa(hops), "set API_TRUSTED_PROXIES or API_TRUSTED_PROXY_HOPS, not both")
	case trustAll && (len(list) > 0 || hops > 0):
		l.failf("API_TRUST_PROXY", "true", "deprecated, and replaced by API_TRUSTED_PROXIES or API_TRUSTED_PROXY_HOPS, which are set: unset it")
	case trustAll:
		return httpapi.LoopbackProxies, true
	}
	return p, false
}

// parseProxy reads a CIDR or a single address. A prefix of every address
// (0.0.0.0/0, ::/0) is refused: it would let any client choose its address.
func parseProxy(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("not an address or a CIDR")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	pr, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or a CIDR")
	}
	if pr.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("trusts every address: any client could choose its own")
	}
	if pr.Addr().Is4In6() {
		if pr.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("an IPv4-mapped prefix shorter than /96")
		}
		pr = netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()-96)
	}
	return pr.Masked(), nil
}
