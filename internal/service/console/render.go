package console

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// The pages: one layout, and one file per page defining its "content".
//
//go:embed templates/*.html static/console.css
var files embed.FS

// pages are the parsed templates by page file name ("overview.html").
type pages map[string]*template.Template

func parsePages() (pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := pages{}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(files, name)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		out[base] = t
	}
	return out, nil
}

// view is what every page's template gets: the layout's fields and the
// page's own data in Data.
type view struct {
	Title    string
	Nav      string // the menu entry to mark: overview, dead, money, jobs
	Prefix   string
	Operator string
	CSRF     string
	Now      time.Time
	Data     any
}

// httpError is an error with the status a page answers it with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, a ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, a...)}
}

// rendered is what a page handler returns: its template, title and data.
type rendered struct {
	file   string
	title  string
	nav    string
	data   any
	status int // 0 = 200
}

// page adapts a page handler: it renders what the handler returns, or the
// error page.
func (c *Console) page(h func(w http.ResponseWriter, r *http.Request) (rendered, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := h(w, r)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		c.render(w, r, out)
	}
}

// actionBodyMax bounds a form's body: a selection of dead messages.
const actionBodyMax = 256 << 10

// action adapts a state-changing handler: the form is parsed and its CSRF
// token checked before the handler runs; a refused request changes nothing.
func (c *Console) action(h func(w http.ResponseWriter, r *http.Request) (rendered, error)) http.HandlerFunc {
	return c.page(func(w http.ResponseWriter, r *http.Request) (rendered, error) {
		r.Body = http.MaxBytesReader(w, r.Body, actionBodyMax)
		if err := r.ParseForm(); err != nil {
			return rendered{}, errorf(http.StatusBadRequest, "the form could not be read: %v", err)
		}
		if err := c.checkCSRF(r); err != nil {
			c.backends.Log.WarnContext(r.Context(), "console: action refused", "operator", c.backends.Operator(r), "path", r.URL.Path, "err", err)
			return rendered{}, err
		}
		return h(w, r)
	})
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, out rendered) {
	t, ok := c.pages[out.file]
	if !ok {
		c.fail(w, r, fmt.Errorf("console: no template %s", out.file))
		return
	}
	v := view{Title: out.title, Nav: out.nav, Prefix: c.cfg.Prefix, Operator: c.backends.Operator(r), CSRF: c.csrfToken(w, r), Now: c.now(), Data: out.data}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", v); err != nil {
		c.backends.Log.ErrorContext(r.Context(), "console: render", "page", out.file, "err", err)
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(max(out.status, http.StatusOK))
	_, _ = b.WriteTo(w)
}

// fail renders the error page: the status an httpError carries, else 500
// (logged).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := "internal error: " + err.Error()
	if he, ok := errors.AsType[*httpError](err); ok {
		status, msg = he.status, he.msg
	} else {
		c.backends.Log.ErrorContext(r.Context(), "console: page failed", "path", r.URL.Path, "err", err)
	}
	c.render(w, r, rendered{file: "error.html", title: http.StatusText(status), data: msg, status: status})
}

func (c *Console) css(w http.ResponseWriter, r *http.Request) {
	b, _ := files.ReadFile("static/console.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":       ago,
	"time":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"timep":     func(t *time.Time) string { return fmtTimePtr(t) },
	"bytes":     humanBytes,
	"clip":      clip,
	"rate":      func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"deref":     func(s *string) string { return derefString(s) },
	"derefTime": func(t *time.Time) time.Time { return derefTime(t) },
	"dur":       shortDuration,
	"plural":    plural,
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// shortDuration prints d to the second, without zero units: "10m", "1m30s".
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// plural is "1 entry" or "n entries": word and its plural form.
func plural(n any, one, many string) string {
	if fmt.Sprint(n) == "1" {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}

// ago says how long before now t was, coarsely: "42s", "5m", "3h", "2d".
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func humanBytes(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// clip makes s one line of at most n runes.
func clip(n int, s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
