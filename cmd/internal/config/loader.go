package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
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

// loader reads variables through lookupEnv (os.LookupEnv in the binaries),
// collects every problem, and records what it read so the documentation
// derives from the code.
type loader struct {
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error) // the files variables name (API_JWT_SECRET_FILE)
	errs      []error
	seen      []Var
}

// newLoader reads lookupEnv and the files it names; with a nil lookupEnv
// (for the documentation) every variable is unset and no file exists.
func newLoader(lookupEnv func(string) (string, bool)) *loader {
	if lookupEnv == nil {
		return &loader{
			lookupEnv: func(string) (string, bool) { return "", false },
			readFile:  func(string) ([]byte, error) { return nil, fs.ErrNotExist },
		}
	}
	return &loader{lookupEnv: lookupEnv, readFile: os.ReadFile}
}

func (l *loader) err() error { return errors.Join(l.errs...) }

func (l *loader) failf(name, raw, format string, a ...any) {
	l.errs = append(l.errs, fmt.Errorf("%s=%q: %s", name, raw, fmt.Sprintf(format, a...)))
}

// raw records the variable and returns its trimmed value ("" = unset or
// empty).
func (l *loader) raw(v Var) string {
	s, _ := l.lookup(v)
	return s
}

// lookup records the variable and returns its trimmed value and whether it
// is set at all (to empty, perhaps).
func (l *loader) lookup(v Var) (string, bool) {
	l.seen = append(l.seen, v)
	s, ok := l.lookupEnv(v.Name)
	return strings.TrimSpace(s), ok
}

// read records a variable and returns its value parsed, or def when it is
// unset or empty. A value parse refuses is reported (parse's error says
// why) and def taken, so every bad variable is named at once.
func read[T any](l *loader, v Var, def T, parse func(string) (T, error)) T {
	raw := l.raw(v)
	if raw == "" {
		return def
	}
	out, err := parse(raw)
	if err != nil {
		l.failf(v.Name, raw, "%v", err)
		return def
	}
	return out
}

// asIs is the parse of a plain string: any value is good.
func asIs(v string) (string, error) { return v, nil }

// String reads a plain string.
func (l *loader) String(name, def, doc string) string {
	return read(l, Var{Name: name, Default: def, Doc: doc}, def, asIs)
}

// OptionalAddr reads a listen address (host:port) that may be switched
// off: unset, it is def; set to empty, it is "" (serve none). This is the
// one kind of variable whose empty value differs from its default.
func (l *loader) OptionalAddr(name, def, doc string) string {
	v, set := l.lookup(Var{Name: name, Default: def, Doc: doc})
	switch {
	case !set:
		return def
	case v == "":
		return ""
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		l.failf(name, v, "want host:port (e.g. 127.0.0.1:9090), or empty to serve none")
		return def
	}
	return v
}

// HostPorts reads a comma-separated list of host:port, each with a host
// and a port 1-65535; a bad item is reported by name, as in example.
func (l *loader) HostPorts(name, example, doc string) []string {
	var out []string
	for _, a := range l.List(name, nil, doc) {
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			l.failf(name, a, "want host:port with a port 1-65535 (e.g. %s)", example)
			continue
		}
		out = append(out, a)
	}
	return out
}

// Secret is a string that is never printed (passwords, keys).
func (l *loader) Secret(name, def, doc string) string {
	return read(l, Var{Name: name, Default: def, Doc: doc, Secret: true}, def, asIs)
}

// Int reads an integer in lo..hi.
func (l *loader) Int(name string, def, lo, hi int, doc string) int {
	return read(l, Var{Name: name, Default: strconv.Itoa(def), Doc: doc}, def, func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return 0, errors.New("not an integer")
		case n < lo || n > hi:
			return 0, fmt.Errorf("out of range %d..%d", lo, hi)
		}
		return n, nil
	})
}

// Bool reads true or false (or 1, 0, t, f, as strconv.ParseBool does).
func (l *loader) Bool(name string, def bool, doc string) bool {
	return read(l, Var{Name: name, Default: strconv.FormatBool(def), Doc: doc}, def, func(v string) (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, errors.New("want true or false")
		}
		return b, nil
	})
}

// Millis reads a *_MS variable: a whole number of milliseconds, as the
// Spring backend's properties are written.
func (l *loader) Millis(name string, def, lo, hi time.Duration, doc string) time.Duration {
	shown := strconv.FormatInt(def.Milliseconds(), 10)
	return read(l, Var{Name: name, Default: shown, Doc: doc}, def, func(v string) (time.Duration, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, errors.New("want a whole number of milliseconds")
		}
		d, ok := millisWithin(n, lo, hi)
		if !ok {
			return 0, fmt.Errorf("out of range %d..%d ms", lo.Milliseconds(), hi.Milliseconds())
		}
		return d, nil
	})
}

// Duration reads a Go duration ("3s", "500ms"); a bare number means
// milliseconds, as Spring reads REDIS_TIMEOUT.
func (l *loader) Duration(name string, def, lo, hi time.Duration, doc string) time.Duration {
	return read(l, Var{Name: name, Default: def.String(), Doc: doc}, def, func(v string) (time.Duration, error) {
		return parseDuration(v, lo, hi)
	})
}

// parseDuration parses a Duration variable's value and checks it is in lo..hi.
func parseDuration(v string, lo, hi time.Duration) (time.Duration, error) {
	var (
		d  time.Duration
		ok bool
	)
	if pd, err := time.ParseDuration(v); err == nil {
		d, ok = pd, within(pd, lo, hi)
	} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		d, ok = millisWithin(n, lo, hi) // a bare number is milliseconds
	} else {
		return 0, errors.New(`want a duration such as "3s" or "500ms"`)
	}
	if !ok {
		return 0, fmt.Errorf("out of range %s..%s", lo, hi)
	}
	return d, nil
}

// within reports whether d lies in lo..hi.
func within(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }

// millisWithin is n milliseconds as a Duration, and whether that lies in
// lo..hi. n is compared before it is multiplied: n × time.Millisecond wraps
// for a huge n, and the wrapped value may well lie in the range. The second
// comparison keeps bounds that are not whole milliseconds exact.
func millisWithin(n int64, lo, hi time.Duration) (time.Duration, bool) {
	if n < lo.Milliseconds() || n > hi.Milliseconds() {
		return 0, false
	}
	d := time.Duration(n) * time.Millisecond
	return d, within(d, lo, hi)
}

// List reads a comma-separated list; blank items are dropped.
func (l *loader) List(name string, def []string, doc string) []string {
	return read(l, Var{Name: name, Default: strings.Join(def, ","), Doc: doc}, def, func(v string) ([]string, error) {
		var out []string
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		return out, nil
	})
}

// OneOf reads a string that must be one of allowed (in any case); it
// returns the allowed spelling.
func (l *loader) OneOf(name, def string, allowed []string, doc string) string {
	return read(l, Var{Name: name, Default: def, Doc: doc}, def, func(v string) (string, error) {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				return a, nil
			}
		}
		return "", fmt.Errorf("want one of %s", strings.Join(allowed, ", "))
	})
}
