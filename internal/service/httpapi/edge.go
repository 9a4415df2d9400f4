package httpapi

import (
	"context"
	"net/http"
	"strings"
)

// Trace context at the public edge (doc/tracing.md, "At the edge"): a
// request continues its caller's trace only when the caller is one Isle
// trusts with it: a service-role token (the agent gateway, a Spring
// service) or a trusted proxy (Config.Proxies). The token is checked once
// here, for the span, and its check kept for authenticate. Any other caller, a user's
// app or an anonymous client, gets a trace of Isle's own, linked to the
// one it sent, and its baggage is dropped, so that what it sent never
// reaches the broker with Isle's messages; tracestate goes with the span it
// belonged to.

type (
	publicKey  struct{}
	checkedKey struct{}
)

// checked is a bearer token edge checked, and what the check answered:
// authenticate takes it from the request's context instead of checking
// the token again.
type checked struct {
	token string
	p     Principal
	err   error
}

// edge marks a request from a caller not trusted with Isle's traces and
// drops its baggage, before the request's span is made.
func (s *Server) edge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		trusted := s.cfg.Proxies.FromProxy(r.RemoteAddr)
		if token, ok := bearer(r); ok {
			c := checked{token: token}
			c.p, c.err = s.auth.check(token)
			ctx = context.WithValue(ctx, checkedKey{}, c)
			trusted = trusted || c.err == nil && c.p.Role == RoleService
		}
		if !trusted {
			r.Header.Del("baggage")
			ctx = context.WithValue(ctx, publicKey{}, true)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// publicCaller is otelhttp's public-endpoint decision: the one edge made.
func publicCaller(r *http.Request) bool {
	public, _ := r.Context().Value(publicKey{}).(bool)
	return public
}

// bearer is r's bearer token, if it has one.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// checkToken is the authenticator's check of token, as edge made it for
// this request when it did.
func (s *Server) checkToken(ctx context.Context, token string) (Principal, error) {
	if c, ok := ctx.Value(checkedKey{}).(checked); ok && c.token == token {
		return c.p, c.err
	}
	return s.auth.check(token)
}
