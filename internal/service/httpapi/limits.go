package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/eisland/isle/internal/kit/ratelimit"
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
	// OnlyAccepted counts only the requests the route accepts: a request
	// this limit counted that is then refused (by a later limit, or by its
	// handler returning an error) is given back. A FixedWindow limit only.
	OnlyAccepted bool
}

// limitTimeout bounds one limit check; a limit that cannot reach Redis in
// time lets the request through (fail-open, logged and counted).
const limitTimeout = 250 * time.Millisecond

// limit applies l: a refused request is a 429 with Retry-After.
func (s *Server) limit(r *http.Request, l Limit) error {
	_, err := s.count(r, l)
	return err
}

// counted is a request's count against a limit: where it was counted,
// and for a FixedWindow limit the window it fell in, which is the only
// one giveBack may return it to.
type counted struct {
	limit  Limit
	key    string
	window ratelimit.Window
}

// count applies l as limit does, and says what the request counted
// against l: nil when nothing (a limit that does not apply, or could not
// reach Redis).
func (s *Server) count(r *http.Request, l Limit) (*counted, error) {
	allowed, retry, c := s.take(r, l)
	if allowed {
		return c, nil
	}
	s.metrics.limited.WithLabelValues(l.Name).Inc()
	return c, &Error{
		Status: http.StatusTooManyRequests, Code: CodeRateLimited, RetryAfter: max(retry, time.Second),
		Message: fmt.Sprintf("too many requests (%s: %d per %s)", l.Name, l.Max, l.Per),
	}
}

// over counts the request against l and reports whether it went over l,
// refusing nothing: a soft limit, such as the leaderboard's, whose answer
// only asks for a CAPTCHA once it is over.
func (s *Server) over(r *http.Request, l Limit) bool {
	allowed, _, _ := s.take(r, l)
	return !allowed
}

// take counts the request against l and says whether l allows it, and
// when not, how long until it would, and what it counted (nil for
// nothing). A limit that cannot reach Redis allows it (fail-open, logged
// and counted). The windows run on the server's clock (Backends.Now).
func (s *Server) take(r *http.Request, l Limit) (allowed bool, retry time.Duration, c *counted) {
	p, _ := PrincipalFrom(r.Context())
	values, ok := l.Key(r, p)
	if !ok {
		return true, 0, nil
	}
	key := s.backends.Redis.Keys().Key(l.Family, values...)
	client := s.backends.Redis.Client(l.Family.DB)
	ctx, cancel := context.WithTimeout(r.Context(), limitTimeout)
	defer cancel()
	c = &counted{limit: l, key: key}
	var err error
	switch l.Kind {
	case TokenBucket:
		var res ratelimit.BucketResult
		res, err = ratelimit.TakeToken(ctx, client, key, ratelimit.Bucket{Capacity: l.Max, Window: l.Per}, time.Time{})
		allowed, retry = res.Allowed, res.RetryAfter
	case FixedWindow:
		c.window, err = ratelimit.IncrWindow(ctx, client, key, l.Per, s.now())
		allowed, retry = c.window.Count <= int64(l.Max), c.window.ResetIn
	case SlidingWindow:
		var res ratelimit.Sliding
		res, err = ratelimit.SlideWindow(ctx, client, key, l.Max, l.Per, s.now())
		allowed, retry = res.Allowed, res.RetryAfter
	default:
		err = fmt.Errorf("unknown limit kind %d", l.Kind)
	}
	if err != nil {
		s.metrics.limitFailOps.Inc()
		s.backends.Log.WarnContext(ctx, "rate limit unavailable; letting the request through", "limit", l.Name, "err", err)
		return true, 0, nil
	}
	return allowed, retry, c
}

// giveBack returns what a refused request counted against limits that
// count only accepted requests (Limit.OnlyAccepted), each to the window it
// was counted in: a window that has ended by now takes nothing back, and
// the window after it is not given what an earlier one counted. It runs
// after the answer is decided, whether or not the client is still there;
// a failure is logged (the count then stays until its window ends).
func (s *Server) giveBack(r *http.Request, counts []*counted) {
	if len(counts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), limitTimeout)
	defer cancel()
	for _, c := range counts {
		client := s.backends.Redis.Client(c.limit.Family.DB)
		if _, err := ratelimit.GiveBackWindow(ctx, client, c.key, c.window, s.now()); err != nil {
			s.backends.Log.WarnContext(ctx, "a refused request's count could not be given back", "limit", c.limit.Name, "err", err)
		}
	}
}

// checkLimits refuses a route whose limits the platform cannot apply.
func checkLimits(rt Route) error {
	for _, l := range rt.Limits {
		if l.OnlyAccepted && l.Kind != FixedWindow {
			return fmt.Errorf("httpapi: %s %s: limit %s: OnlyAccepted needs a FixedWindow limit", rt.Method, rt.Path, l.Name)
		}
	}
	return nil
}

// BySubject keys a limit by the caller's token subject.
func BySubject(_ *http.Request, p Principal) ([]string, bool) {
	return []string{p.Subject}, p.Subject != ""
}
