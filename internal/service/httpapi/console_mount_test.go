package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// consoleServer serves the API with a stand-in console that answers with
// the principal the API authenticated; nil serves none.
func consoleServer(t *testing.T, admin http.Handler) (*httptest.Server, *testBundle) {
	t.Helper()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	srv, err := httpapi.New(httpapi.Config{JWTSecret: secret}, httpapi.Backends{DB: db, Redis: r, Billing: billing.New(db, r),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(), Admin: admin})
	require.NoError(t, err)
	h := httptest.NewServer(srv)
	t.Cleanup(h.Close)
	return h, &testBundle{db: db, redis: r}
}

var echoPrincipal = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	p, _ := httpapi.PrincipalFrom(r.Context())
	_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" as "+p.Subject)
})

// noRedirects is a client that shows redirects rather than following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// The console is the admin role's: without a token a request is 401 (a
// browser gets the login form with it), with another role's 403, with an
// admin's bearer token or login cookie it reaches the console as that admin.
func TestConsoleIsServedToAdminsOnly(t *testing.T) {
	t.Parallel()
	h, b := consoleServer(t, echoPrincipal)
	admin, user := b.token(t, "root", httpapi.RoleAdmin), b.token(t, "alice", httpapi.RoleUser)

	for method, path := range map[string]string{http.MethodGet: "/admin/dead", http.MethodPost: "/admin/dead/replay"} {
		resp, body := send(t, method, h.URL+path, "")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, method)
		require.Contains(t, body, `"code":"unauthorized"`)
		resp, body = send(t, method, h.URL+path, "", "Authorization", "Bearer "+user)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, method)
		require.Contains(t, body, "role user may not call this endpoint")
		resp, body = send(t, method, h.URL+path, "", "Cookie", httpapi.AdminCookie+"="+user)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, method)
		require.Contains(t, body, "role user may not call this endpoint")
		resp, body = send(t, method, h.URL+path, "", "Authorization", "Bearer "+admin)
		require.Equal(t, http.StatusOK, resp.StatusCode, method)
		require.Equal(t, method+" "+path+" as root", body)
	}
	resp, body := send(t, http.MethodGet, h.URL+"/admin/jobs?x=1", "", "Accept", "text/html,application/xhtml+xml")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, body, `<form method="post" action="/admin/login">`)
	require.Contains(t, body, `name="next" value="/admin/jobs?x=1"`)
	resp, body = send(t, http.MethodGet, h.URL+"/admin/", "", "Accept", "text/html", "Cookie", httpapi.AdminCookie+"="+user)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "role user may not call this endpoint")
}

// Logging in checks the token as an admin's and keeps it in an HttpOnly,
// SameSite=Strict cookie of /admin; the cookie opens the console; logging
// out forgets it. A login returns to a console page only.
func TestConsoleLoginCookie(t *testing.T) {
	t.Parallel()
	h, b := consoleServer(t, echoPrincipal)
	admin, user := b.token(t, "root", httpapi.RoleAdmin), b.token(t, "alice", httpapi.RoleUser)

	resp, body := send(t, http.MethodGet, h.URL+"/admin/login", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `name="token"`)

	resp, body = send(t, http.MethodPost, h.URL+"/admin/login", url.Values{"token": {user}, "next": {"/admin/jobs"}}.Encode())
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Cookies())
	require.Contains(t, body, "role user may not call this endpoint")
	resp, _ = send(t, http.MethodPost, h.URL+"/admin/login", url.Values{"token": {"forged"}}.Encode())
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp, _ = send(t, http.MethodPost, h.URL+"/admin/login", url.Values{"token": {admin}, "next": {"/admin/jobs"}}.Encode())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/jobs", resp.Header.Get("Location"))
	require.Len(t, resp.Cookies(), 1)
	c := resp.Cookies()[0]
	require.Equal(t, httpapi.AdminCookie, c.Name)
	require.Equal(t, admin, c.Value)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/admin", c.Path)
	resp, body = send(t, http.MethodGet, h.URL+"/admin/jobs", "", "Cookie", c.Name+"="+c.Value)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "GET /admin/jobs as root", body)

	for _, next := range []string{"//evil.example/", "https://evil.example/", "/v1/me", "/admin/\\evil"} {
		resp, _ = send(t, http.MethodPost, h.URL+"/admin/login", url.Values{"token": {admin}, "next": {next}}.Encode())
		require.Equal(t, "/admin/", resp.Header.Get("Location"), next)
	}
	resp, _ = send(t, http.MethodPost, h.URL+"/admin/logout", "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	require.Negative(t, resp.Cookies()[0].MaxAge)
}

func TestNoConsoleIs404(t *testing.T) {
	t.Parallel()
	h, b := consoleServer(t, nil)
	admin := b.token(t, "root", httpapi.RoleAdmin)
	resp, _ := send(t, http.MethodGet, h.URL+"/admin/", "", "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = send(t, http.MethodGet, h.URL+"/admin/login", "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
