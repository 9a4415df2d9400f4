package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Var describes one environment variable as a loader saw it.
type Var struct {
	Name    string
	Default string // as a user would write it; "" = empty
	Doc     string
	Secret  bool // never printed
}

// loader reads variables through getenv, collects every problem, and records
// what it read so the documentation derives from the code.
type loader struct {
	getenv func(string) string
	errs   []error
	seen   []Var
}

func newLoader(getenv func(string) string) *loader {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return &loader{getenv: getenv}
}

func (l *loader) err() error { return errors.Join(l.errs...) }

func (l *loader) failf(name, raw, format string, a ...any) {
	l.errs = append(l.errs, fmt.Errorf("%s=%q: %s", name, raw, fmt.Sprintf(format, a...)))
}

// raw records the variable and returns its trimmed value ("" = unset).
func (l *loader) raw(name, def, doc string, secret bool) string {
	l.seen = append(l.seen, Var{Name: name, Default: def, Doc: doc, Secret: secret})
	return strings.TrimSpace(l.getenv(name))
}

func (l *loader) String(name, def, doc string) string {
	if v := l.raw(name, def, doc, false); v != "" {
		return v
	}
	return def
}

// Secret is a string that is never printed (passwords, keys).
func (l *loader) Secret(name, def, doc string) string {
	if v := l.raw(name, def, doc, true); v != "" {
		return v
	}
	return def
}

func (l *loader) Int(name string, def, lo, hi int, doc string) int {
	v := l.raw(name, strconv.Itoa(def), doc, false)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		l.failf(name, v, "not an integer")
		return def
	}
	if n < lo || n > hi {
		l.failf(name, v, "out of range %d..%d", lo, hi)
		return def
	}
	return n
}

func (l *loader) Bool(name string, def bool, doc string) bool {
	v := l.raw(name, strconv.FormatBool(def), doc, false)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		l.failf(name, v, "want true or false")
		return def
	}
	return b
}

// Millis reads a *_MS variable: a whole number of milliseconds, as the
// seed's Spring properties are written.
func (l *loader) Millis(name string, def, lo, hi time.Duration, doc string) time.Duration {
	v := l.raw(name, strconv.FormatInt(def.Milliseconds(), 10), doc, false)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		l.failf(name, v, "want a whole number of milliseconds")
		return def
	}
	d := time.Duration(n) * time.Millisecond
	if d < lo || d > hi {
		l.failf(name, v, "out of range %d..%d ms", lo.Milliseconds(), hi.Milliseconds())
		return def
	}
	return d
}

// Duration reads a Go duration ("3s", "500ms"); a bare number means
// milliseconds, as Spring reads REDIS_TIMEOUT.
func (l *loader) Duration(name string, def, lo, hi time.Duration, doc string) time.Duration {
	v := l.raw(name, def.String(), doc, false)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseInt(v, 10, 64)
		if nerr != nil {
			l.failf(name, v, `want a duration such as "3s" or "500ms"`)
			return def
		}
		d = time.Duration(n) * time.Millisecond
	}
	if d < lo || d > hi {
		l.failf(name, v, "out of range %s..%s", lo, hi)
		return def
	}
	return d
}

// List reads a comma-separated list; blank items are dropped.
func (l *loader) List(name string, def []string, doc string) []string {
	v := l.raw(name, strings.Join(def, ","), doc, false)
	if v == "" {
		return def
	}
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// OneOf reads a string that must be one of allowed.
func (l *loader) OneOf(name, def string, allowed []string, doc string) string {
	v := l.raw(name, def, doc, false)
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	l.failf(name, v, "want one of %s", strings.Join(allowed, ", "))
	return def
}
