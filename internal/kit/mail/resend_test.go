package mail_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	isle "github.com/eisland/isle/internal/kit/mail"
)

// resendAPI is a Resend-compatible endpoint that records requests and
// answers each with the next reply.
type resendAPI struct {
	srv *httptest.Server

	mu       sync.Mutex
	status   int
	body     string
	requests []resendCall
}

type resendCall struct {
	method, path string
	header       http.Header
	body         map[string]any
}

func startResend(t *testing.T) *resendAPI {
	t.Helper()
	a := &resendAPI{status: http.StatusOK, body: `{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.requests = append(a.requests, resendCall{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		status, reply := a.status, a.body
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *resendAPI) reply(status int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status, a.body = status, body
}

func (a *resendAPI) calls() []resendCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]resendCall(nil), a.requests...)
}

func (a *resendAPI) mailer(t *testing.T, path string) isle.Mailer {
	t.Helper()
	host := strings.TrimPrefix(a.srv.URL, "http://")
	m, err := isle.Open("resend://"+host+path+"?secure=false&from=Isle%20%3Cno-reply%40isle.example%3E", isle.Options{APIKey: "re_test_key"})
	require.NoError(t, err)
	return m
}

func TestMailResendRequest(t *testing.T) {
	t.Parallel()
	api := startResend(t)
	m := testMessage()
	require.NoError(t, api.mailer(t, "").Send(context.Background(), m))
	require.NoError(t, api.mailer(t, "/v1/").Send(context.Background(), m))

	calls := api.calls()
	require.Len(t, calls, 2)
	c := calls[0]
	require.Equal(t, http.MethodPost, c.method)
	require.Equal(t, "/emails", c.path)
	require.Equal(t, "/v1/emails", calls[1].path)
	require.Equal(t, "Bearer re_test_key", c.header.Get("Authorization"))
	require.Equal(t, m.IdempotencyKey, c.header.Get("Idempotency-Key"))
	require.Equal(t, "application/json", c.header.Get("Content-Type"))
	require.Equal(t, map[string]any{
		"from":    `"Isle" <no-reply@isle.example>`,
		"to":      []any{m.To},
		"subject": m.Subject,
		"text":    m.Text,
		"html":    m.HTML,
		"headers": map[string]any{"Auto-Submitted": "auto-generated"},
	}, c.body)
}

func TestMailResendErrorClasses(t *testing.T) {
	t.Parallel()
	api := startResend(t)
	mailer := api.mailer(t, "")
	for _, tc := range []struct {
		status    int
		body      string
		permanent bool
	}{
		{422, `{"statusCode":422,"name":"validation_error","message":"Invalid ` + "`to`" + ` field."}`, true},
		{400, `{"name":"validation_error"}`, true},
		{401, `{"name":"missing_api_key"}`, true},
		{403, `{"name":"invalid_api_key"}`, true},
		{409, `{"name":"invalid_idempotent_request","message":"Same idempotency key used with a different request payload."}`, true},
		{409, `{"name":"concurrent_idempotent_requests"}`, false},
		{408, ``, false},
		{429, `{"name":"rate_limit_exceeded"}`, false},
		{500, `{"name":"internal_server_error"}`, false},
		{503, `not JSON`, false},
	} {
		api.reply(tc.status, tc.body)
		err := mailer.Send(context.Background(), testMessage())
		require.Error(t, err, tc.status)
		require.ErrorContains(t, err, fmt.Sprintf("HTTP %d", tc.status))
		if tc.permanent {
			require.ErrorIs(t, err, isle.ErrPermanent, "%d %s", tc.status, tc.body)
		} else {
			require.NotErrorIs(t, err, isle.ErrPermanent, "%d %s", tc.status, tc.body)
		}
		require.NotContains(t, err.Error(), "re_test_key")
	}
	api.reply(http.StatusOK, `{"id":"x"}`)
	require.NoError(t, mailer.Send(context.Background(), testMessage()))
}

func TestMailResendNetworkErrorIsTemporary(t *testing.T) {
	t.Parallel()
	api := startResend(t)
	mailer := api.mailer(t, "")
	api.srv.Close()
	err := mailer.Send(context.Background(), testMessage())
	require.Error(t, err)
	require.NotErrorIs(t, err, isle.ErrPermanent)

	// A server that does not answer within the timeout: temporary too.
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(release) }) // runs first
	mailer, err = isle.Open("resend://"+strings.TrimPrefix(stuck.URL, "http://")+"?secure=false&from=a%40b.example",
		isle.Options{APIKey: "k", Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	err = mailer.Send(context.Background(), testMessage())
	require.Error(t, err)
	require.NotErrorIs(t, err, isle.ErrPermanent)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestMailResendBadMessageSendsNothing(t *testing.T) {
	t.Parallel()
	api := startResend(t)
	m := testMessage()
	m.To = "a@b.c\r\nBcc: x@y.z"
	err := api.mailer(t, "").Send(context.Background(), m)
	require.ErrorIs(t, err, isle.ErrPermanent)
	require.ErrorIs(t, err, isle.ErrBadMessage)
	require.Empty(t, api.calls())
}
