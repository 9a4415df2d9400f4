package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

func ok(w http.ResponseWriter, r *http.Request) error {
	return httpapi.JSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func TestEachLimitAnswers429WithRetryAfter(t *testing.T) {
	t.Parallel()
	perUser := func(r *http.Request, p httpapi.Principal) ([]string, bool) { return []string{"g", p.Subject}, true }
	b := setup(t, options{routes: []httpapi.Route{
		{Method: http.MethodPost, Path: "/test/bucket", Roles: httpapi.Roles, Handle: ok, Limits: []httpapi.Limit{{
			Name: "bucket", Kind: httpapi.TokenBucket, Family: keys.ScoreSubmitRate, Max: 3, Per: time.Minute, Key: perUser}}},
		{Method: http.MethodPost, Path: "/test/window", Roles: httpapi.Roles, Handle: ok, Limits: []httpapi.Limit{{
			Name: "window", Kind: httpapi.FixedWindow, Family: keys.ScoreSubmitRate, Max: 3, Per: time.Minute, Key: perUser}}},
		{Method: http.MethodPost, Path: "/test/sliding", Roles: httpapi.Roles, Handle: ok, Limits: []httpapi.Limit{{
			Name: "sliding", Kind: httpapi.SlidingWindow, Family: keys.RegisterAttempts, Max: 3, Per: time.Hour,
			Key: httpapi.BySubject}}},
	}})
	for _, path := range []string{"/test/bucket", "/test/window", "/test/sliding"} {
		user := "u" + path[6:]
		tok := b.token(t, user, httpapi.RoleUser)
		for i := range 3 {
			status, _, _ := b.do(t, http.MethodPost, path, tok, "")
			require.Equal(t, http.StatusOK, status, "%s request %d", path, i+1)
		}
		status, h, body := b.do(t, http.MethodPost, path, tok, "")
		require.Equal(t, http.StatusTooManyRequests, status, path)
		require.Equal(t, "rate_limited", errorCode(t, body))
		secs, err := strconv.Atoi(h.Get("Retry-After"))
		require.NoError(t, err, path)
		require.Positive(t, secs, path)
		// Another caller has a budget of its own.
		status, _, _ = b.do(t, http.MethodPost, path, b.token(t, user+"-other", httpapi.RoleUser), "")
		require.Equal(t, http.StatusOK, status, path)
		require.EqualValues(t, 1, b.metric(t, "isle_rate_limited_total", map[string]string{"limit": path[6:]}))
	}
}

func TestReplayProtection(t *testing.T) {
	t.Parallel()
	b := setup(t, options{routes: []httpapi.Route{
		{Method: http.MethodPost, Path: "/test/sensitive", Roles: httpapi.Roles, Replay: true, Handle: ok},
	}})
	tok := b.token(t, "alice", httpapi.RoleUser)
	now := time.Now()
	send := func(ts time.Time, nonce string) (int, map[string]any) {
		status, _, body := b.do(t, http.MethodPost, "/test/sensitive", tok, "",
			httpapi.HeaderTimestamp, strconv.FormatInt(ts.UnixMilli(), 10), httpapi.HeaderNonce, nonce)
		return status, body
	}
	status, _ := send(now, "nonce-0001")
	require.Equal(t, http.StatusOK, status)
	status, body := send(now, "nonce-0001")
	require.Equal(t, http.StatusConflict, status, "a replayed nonce")
	require.Equal(t, "conflict", errorCode(t, body))
	status, _ = send(now, "nonce-0002")
	require.Equal(t, http.StatusOK, status)
	status, body = send(now.Add(-6*time.Minute), "nonce-0003")
	require.Equal(t, http.StatusBadRequest, status, "a stale timestamp")
	require.Contains(t, fmt.Sprint(body), "X-Timestamp")
	status, _ = send(now.Add(6*time.Minute), "nonce-0004")
	require.Equal(t, http.StatusBadRequest, status, "a timestamp from the future")
	status, _, _ = b.do(t, http.MethodPost, "/test/sensitive", tok, "")
	require.Equal(t, http.StatusBadRequest, status, "no headers")
	// Epoch seconds are accepted too.
	status, _, _ = b.do(t, http.MethodPost, "/test/sensitive", tok, "",
		httpapi.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10), httpapi.HeaderNonce, "nonce-0005")
	require.Equal(t, http.StatusOK, status)
}
