package httpapi

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
)

// The operator console (internal/service/console, doc/console.md) is served under
// /admin/ to the admin role. Browsers send no bearer header, so a token can
// also come from the AdminCookie, which POST /admin/login sets (HttpOnly,
// SameSite=Strict, path /admin) once the token proves an admin. A browser
// that opens a console page without a valid admin token gets the login
// form with the 401 or 403; any other client gets the error model.
const (
	AdminCookie = "isle_admin"
	adminPath   = "/admin"
	// adminMaxBody bounds a console form: a selection of dead messages.
	adminMaxBody = 256 << 10
)

// consolePage is a page of the console: a GET for the admin role.
func (s *Server) consolePage(path string) Route {
	return Route{Method: http.MethodGet, Path: path, Roles: []Role{RoleAdmin}, Cookie: AdminCookie, Handle: s.admin}
}

// consoleAction is an action of the console: a POST form for the admin
// role.
func (s *Server) consoleAction(path string) Route {
	return Route{Method: http.MethodPost, Path: path, Roles: []Role{RoleAdmin}, Cookie: AdminCookie, MaxBody: adminMaxBody, Handle: s.admin}
}

// admin serves the console the API was built with.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) error {
	if s.backends.Admin == nil {
		return Errorf(http.StatusNotFound, CodeNotFound, "the operator console is not served here")
	}
	s.backends.Admin.ServeHTTP(w, r)
	return nil
}

// adminLoginForm shows the login form.
func (s *Server) adminLoginForm(w http.ResponseWriter, r *http.Request) error {
	if s.backends.Admin == nil {
		return Errorf(http.StatusNotFound, CodeNotFound, "the operator console is not served here")
	}
	return loginPage(w, http.StatusOK, r.URL.Query().Get("next"), "")
}

// adminLogin checks the token the form carries, as a bearer token of the
// admin role (a banned admin is refused), and keeps it in the cookie.
func (s *Server) adminLogin(w http.ResponseWriter, r *http.Request) error {
	if s.backends.Admin == nil {
		return Errorf(http.StatusNotFound, CodeNotFound, "the operator console is not served here")
	}
	if err := r.ParseForm(); err != nil {
		return BadRequest("the form could not be read: %v", err)
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := r.PostForm.Get("next")
	r.Header.Set("Authorization", "Bearer "+token)
	p, err := s.authenticate(r, []Role{RoleAdmin})
	if e, ok := errors.AsType[*Error](err); ok {
		s.backends.Log.WarnContext(r.Context(), "console login refused", "status", e.Status, "why", e.Message)
		return loginPage(w, e.Status, next, e.Message)
	}
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: AdminCookie, Value: token, Path: adminPath, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
	s.backends.Log.InfoContext(r.Context(), "console login", "sub", p.Subject)
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
	return nil
}

// adminLogout forgets the cookie.
func (s *Server) adminLogout(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, &http.Cookie{Name: AdminCookie, Path: adminPath, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
	http.Redirect(w, r, adminPath+"/login", http.StatusSeeOther)
	return nil
}

// secure reports whether the request came over TLS, to this server or,
// behind a trusted proxy, to the proxy.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || s.cfg.Proxies.FromProxy(r.RemoteAddr) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// tokenFromCookie makes the cookie's token the request's bearer token when
// it sends none.
func tokenFromCookie(r *http.Request, name string) {
	if r.Header.Get("Authorization") != "" {
		return
	}
	if c, err := r.Cookie(name); err == nil && c.Value != "" {
		r.Header.Set("Authorization", "Bearer "+c.Value)
	}
}

// browserDenied answers a browser's page request that authentication
// refused with the login form and the refusal's status, and reports
// whether it did; other requests get the error model.
func browserDenied(w http.ResponseWriter, r *http.Request, err error) bool {
	e, ok := errors.AsType[*Error](err)
	if !ok || r.Method != http.MethodGet || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return false
	}
	_ = loginPage(w, e.Status, r.URL.RequestURI(), e.Message)
	return true
}

// safeNext is where a login returns to: a console page, never elsewhere.
func safeNext(next string) string {
	if strings.HasPrefix(next, adminPath+"/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return adminPath + "/"
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in · Isle console</title>
<style>
body{margin:0;font:14px/1.45 system-ui,sans-serif;background:#f6f7f9;color:#1d232b}
main{max-width:520px;margin:10vh auto;background:#fff;border:1px solid #e3e7ed;border-radius:8px;padding:24px 28px}
h1{font-size:20px;margin:0 0 8px}.bad{color:#b42318;background:#fde8e7;border-radius:6px;padding:8px 12px}
textarea{width:100%;font:12px ui-monospace,monospace;padding:8px;border:1px solid #c9d0da;border-radius:6px}
button{margin-top:10px;font:inherit;padding:6px 14px;border-radius:6px;border:1px solid #2456c7;background:#2456c7;color:#fff}
code{background:#eef1f5;padding:1px 4px;border-radius:4px}
</style></head>
<body><main>
<h1>Isle operator console</h1>
{{if .Why}}<p class="bad" id="why">{{.Why}}</p>{{end}}
<p>Paste a token of the <b>admin</b> role, e.g. from <code>islectl token -user you -role admin -ttl 8h</code>. It is kept in an HttpOnly cookie for this site's /admin pages until the browser closes.</p>
<form method="post" action="/admin/login">
<input type="hidden" name="next" value="{{.Next}}">
<textarea name="token" rows="5" required autofocus aria-label="admin token"></textarea>
<button type="submit" id="login">Log in</button>
</form>
</main></body></html>
`))

func loginPage(w http.ResponseWriter, status int, next, why string) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	return loginTemplate.Execute(w, struct{ Next, Why string }{safeNext(next), why})
}
