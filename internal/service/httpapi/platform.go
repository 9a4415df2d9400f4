package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/eisland/isle/store"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds each readiness check.
const readyTimeout = 2 * time.Second

// healthz answers 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return JSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// serveMetrics returns the handler of the Prometheus registry's metrics on
// the API's own address: a 404, as for any route not served, unless
// Config.PublicMetrics. The metrics (routes, statuses, the runtime) are
// for the operator's scraper, which cmd/api serves them to on its
// operations address.
func (s *Server) serveMetrics() HandlerFunc {
	h := promhttp.HandlerFor(s.backends.Registry, promhttp.HandlerOpts{Registry: s.backends.Registry})
	return func(w http.ResponseWriter, r *http.Request) error {
		if !s.cfg.PublicMetrics {
			return Errorf(http.StatusNotFound, CodeNotFound, "no route %s: metrics are served on the operations address", r.URL.Path)
		}
		h.ServeHTTP(w, r)
		return nil
	}
}

// openAPI serves openapi.yaml as JSON.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIJSON)
	return err
}

// ready answers 200 when MySQL, Redis and RabbitMQ all answer, else 503
// naming the ones that do not.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	checks := map[string]func(context.Context) error{
		"mysql": func(ctx context.Context) error { return store.PingMySQL(ctx, s.backends.DB) },
		"redis": s.backends.Redis.Ping,
	}
	if s.backends.Publisher != nil {
		checks["rabbitmq"] = s.backends.Publisher.Ping
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(checks))
	for name, check := range checks {
		go func() {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			results <- result{name, check(ctx)}
		}()
	}
	status := map[string]string{}
	ready := true
	for range checks {
		res := <-results
		status[res.name] = "ok"
		if res.err != nil {
			status[res.name] = res.err.Error()
			ready = false
		}
	}
	if !ready {
		return JSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "checks": status})
	}
	return JSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": status})
}

// me answers who the token says the caller is, and their account if they have one.
func (s *Server) me(w http.ResponseWriter, r *http.Request) error {
	p, _ := PrincipalFrom(r.Context())
	out := map[string]any{"subject": p.Subject, "role": p.Role, "account": nil}
	if p.Role == RoleUser {
		u, err := store.NewAccounts(s.backends.DB).Get(r.Context(), p.Subject)
		switch {
		case err == nil:
			acct := map[string]any{"username": u.Username, "balanceFen": u.BalanceFen.StringFixed(store.MoneyScale), "proExpireAt": u.ProExpireAt}
			if u.Email != nil {
				acct["email"] = *u.Email
			}
			out["account"] = acct
		case !isNotFound(err):
			return Unavailable("load account", err)
		}
	}
	return JSON(w, http.StatusOK, out)
}
