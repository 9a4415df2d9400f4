package config

import (
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/eisland/isle/internal/service/console"
)

// Console is the operator console's section, read by the API (which serves
// it under /admin/) and by islectl console: the binaries' health endpoints
// it checks, how often it samples the queues, and the reconciler's jobs it
// shows with their schedules and runs on demand (the reconciler's own
// settings, so that a run from the console is the reconciler's run).
type Console struct {
	Enabled        bool // the API only (ADMIN_CONSOLE_ENABLED): serve it under /admin/
	Probes         []console.Probe
	SampleInterval time.Duration
	Reconcile      ReconcileSection
}

func loadConsole(l *loader, apiAddr string) Console {
	c := Console{
		SampleInterval: l.Duration("CONSOLE_SAMPLE_INTERVAL", console.SampleIntervalDefault, time.Second, 10*time.Minute,
			"How often the operator console samples every queue's depth and rates (the management API) and the fleet's health; its sparklines keep 10 minutes of samples."),
	}
	probes := []console.Probe{
		{Name: "api", URL: healthURL(apiAddr)},
		{Name: "worker", URL: healthURL(workerOpsAddr(l))},
		{Name: "relay", URL: healthURL(relayOpsAddr(l))},
		{Name: "reconcile", URL: healthURL(reconcileOpsAddr(l))},
	}
	for _, item := range l.List("CONSOLE_HEALTH_URLS", nil,
		"The health endpoints the operator console checks, comma-separated name=URL: each replaces the default of its name or adds one, and name= drops one. "+
			"The defaults are /healthz on API_ADDR, WORKER_OPS_ADDR, RELAY_OPS_ADDR and RECONCILE_OPS_ADDR (127.0.0.1 for an empty or 0.0.0.0 host); "+
			"set them where the binaries run elsewhere, e.g. worker=http://worker:9090/healthz.") {
		name, raw, ok := strings.Cut(item, "=")
		name, raw = strings.TrimSpace(name), strings.TrimSpace(raw)
		if u, err := url.Parse(raw); !ok || name == "" || raw != "" && (err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https")) {
			l.failf("CONSOLE_HEALTH_URLS", item, "want name=http://host:port/path, or name= to drop one")
			continue
		}
		i := slices.IndexFunc(probes, func(p console.Probe) bool { return p.Name == name })
		switch {
		case raw == "" && i >= 0:
			probes = slices.Delete(probes, i, i+1)
		case raw == "":
		case i >= 0:
			probes[i].URL = raw
		default:
			probes = append(probes, console.Probe{Name: name, URL: raw})
		}
	}
	c.Probes = probes
	c.Reconcile = loadReconcile(l)
	return c
}

// healthURL is the /healthz URL of a listen address as seen from this
// machine; "" (a binary that serves none) stays "".
func healthURL(addr string) string {
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz"
}
