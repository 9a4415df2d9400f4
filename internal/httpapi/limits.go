package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/eisland/isle/internal/ratelimit"
	"github.com/eisland/isle/store/keys"
)

// LimitKind selects the algorithm of a Limit.
type LimitKind int

// The limiters, with the keys of doc/keys.md.
const (
	TokenBucket   LimitKind = iota + 1 // token_bucket.lua: Max tokens refilled over Per (bursts up to Max)
	FixedWindow                        // incr_window.lua: Max requests per Per, the window starting at the first
	SlidingWindow                      // sliding_window.lua: Max requests in any span of Per
)

// Limit is one rate limit of a route. Key gives the values of Family's key
// (e.g. the client IP, or the user); false skips the limit for the request.
type Limit struct {
	Name   string // metric label, e.g. "score-submit"
	Kind   LimitKind
	Family *keys.Family
	Max    int
	Per    time.Duration
	Key    func(r *http.Request, p Principal) ([]string, bool)
}

// limitTimeout bounds one limit check; a limit that cannot reach Redis in
// time lets the request through (fail-open, logged and counted).
const limitTimeout = 250 * time.Millisecond

// limit applies l: a refused request is a 429 with Retry-After.
func (s *Server) limit(r *http.Request, l Limit) error {
	p, _ := PrincipalFrom(r.Context())
	values, ok := l.Key(r, p)
	if !ok {
		return nil
	}
	key := s.deps.Redis.Keys().Key(l.Family, values...)
	c := s.deps.Redis.Client(l.Family.DB)
	ctx, cancel := context.WithTimeout(r.Context(), limitTimeout)
	defer cancel()
	var (
		allowed bool
		retry   time.Duration
		err     error
	)
	switch l.Kind {
	case TokenBucket:
		var res ratelimit.BucketResult
		res, err = ratelimit.TakeToken(ctx, c, key, ratelimit.Bucket{Capacity: l.Max, Window: l.Per}, time.Time{})
		allowed, retry = res.Allowed, res.RetryAfter
	case FixedWindow:
		var w ratelimit.Window
		w, err = ratelimit.IncrWindow(ctx, c, key, l.Per)
		allowed, retry = w.Count <= int64(l.Max), w.ResetIn
	case SlidingWindow:
		var res ratelimit.Sliding
		res, err = ratelimit.SlideWindow(ctx, c, key, l.Max, l.Per, s.now())
		allowed, retry = res.Allowed, res.RetryAfter
	default:
		err = fmt.Errorf("unknown limit kind %d", l.Kind)
	}
	if err != nil {
		s.metrics.limitFailOps.Inc()
		s.deps.Log.WarnContext(ctx, "rate limit unavailable; letting the request through", "limit", l.Name, "err", err)
		return nil
	}
	if allowed {
		return nil
	}
	s.metrics.limited.WithLabelValues(l.Name).Inc()
	return &Error{
		Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: max(retry, time.Second),
		Message: fmt.Sprintf("too many requests (%s: %d per %s)", l.Name, l.Max, l.Per),
	}
}

// BySubject keys a limit by the caller's token subject.
func BySubject(_ *http.Request, p Principal) ([]string, bool) {
	return []string{p.Subject}, p.Subject != ""
}
