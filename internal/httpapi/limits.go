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
	allowed, retry := s.take(r, l)
	if allowed {
		return nil
	}
	s.metrics.limited.WithLabelValues(l.Name).Inc()
	return &Error{
		Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: max(retry, time.Second),
		Message: fmt.Sprintf("too many requests (%s: %d per %s)", l.Name, l.Max, l.Per),
	}
}

// over counts the request against l and reports whether it went over l,
// refusing nothing: a soft limit, such as the leaderboard's, whose answer
// only asks for a CAPTCHA once it is over.
func (s *Server) over(r *http.Request, l Limit) bool {
	allowed, _ := s.take(r, l)
	return !allowed
}

// take counts the request against l and says whether l allows it, and
// when not, how long until it would. A limit that cannot reach Redis
// allows it (fail-open, logged and counted).
func (s *Server) take(r *http.Request, l Limit) (allowed bool, retry time.Duration) {
	p, _ := PrincipalFrom(r.Context())
	values, ok := l.Key(r, p)
	if !ok {
		return true, 0
	}
	key := s.deps.Redis.Keys().Key(l.Family, values...)
	c := s.deps.Redis.Client(l.Family.DB)
	ctx, cancel := context.WithTimeout(r.Context(), limitTimeout)
	defer cancel()
	var err error
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
		return true, 0
	}
	return allowed, retry
}

// BySubject keys a limit by the caller's token subject.
func BySubject(_ *http.Request, p Principal) ([]string, bool) {
	return []string{p.Subject}, p.Subject != ""
}
