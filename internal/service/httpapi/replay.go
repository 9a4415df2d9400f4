package httpapi

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/eisland/isle/store/keys"
)

// Replay protection headers (doc/keys.md, auth:replay): the client's clock, and a
// value it never sends twice.
const (
	HeaderTimestamp = "X-Timestamp" // epoch seconds or milliseconds
	HeaderNonce     = "X-Nonce"
)

var noncePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,128}$`)

// checkReplay refuses a request whose timestamp is more than 5 minutes off
// (400) or whose nonce was seen in the last 5 minutes for the same caller,
// method and path (409). It fails closed: without Redis it cannot tell a
// replay, so the answer is 503.
func (s *Server) checkReplay(r *http.Request) error {
	ctx := r.Context()
	rawTS, nonce := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderNonce)
	ts, err := strconv.ParseInt(rawTS, 10, 64)
	if err != nil || !noncePattern.MatchString(nonce) {
		return BadRequest("replay protection: send %s (epoch seconds or ms) and %s (8-128 of A-Z a-z 0-9 _ -)", HeaderTimestamp, HeaderNonce)
	}
	at := time.Unix(ts, 0)
	if ts > 1e12 {
		at = time.UnixMilli(ts)
	}
	if d := s.now().Sub(at); d > keys.ReplayNonceTTL || d < -keys.ReplayNonceTTL {
		return BadRequest("replay protection: %s is %s from the server's clock; at most %s is allowed", HeaderTimestamp, d.Round(time.Second), keys.ReplayNonceTTL)
	}
	principal := "anonymous:" + s.clientIP(r)
	if p, ok := PrincipalFrom(ctx); ok {
		principal = p.Subject
	}
	key := s.backends.Redis.Keys().Key(keys.ReplayNonce, principal, r.Method, r.URL.Path, nonce)
	// The nonce is remembered while its timestamp is still acceptable: 5
	// minutes, or longer for a client clock that runs ahead.
	ttl := max(at.Add(keys.ReplayNonceTTL).Sub(s.now()), keys.ReplayNonceTTL)
	fresh, err := s.backends.Redis.Client(keys.ReplayNonce.DB).SetNX(ctx, key, strconv.FormatInt(ts, 10), ttl).Result()
	if err != nil {
		return Unavailable("replay check", err)
	}
	if !fresh {
		return Errorf(http.StatusConflict, CodeConflict, "replayed request: nonce %s was used in the last %s", nonce, keys.ReplayNonceTTL)
	}
	return nil
}
