package keys

import (
	"fmt"
	"strings"
	"time"
)

// Family is one key pattern, the Spring backend's or Isle's own, such as
// "agent:balance:{username}".
type Family struct {
	Template string        // the pattern, with {placeholders}
	DB       DB            // logical database
	TTL      time.Duration // 0 = no TTL (persistent) or set by the caller
	Volatile bool          // a cache: deleted by the start-up cleanup
	parts    []string      // literal segments between placeholders; parts[0] is the head
}

func family(tmpl string, db DB, ttl time.Duration, volatile bool) *Family {
	f := &Family{Template: tmpl, DB: db, TTL: ttl, Volatile: volatile}
	rest := tmpl
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			f.parts = append(f.parts, rest)
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			panic("keys: unbalanced template " + tmpl)
		}
		f.parts = append(f.parts, rest[:open])
		rest = rest[open+end+1:]
	}
	registry = append(registry, f)
	return f
}

// Head is the literal text of the template before its first placeholder.
func (f *Family) Head() string { return f.parts[0] }

// Placeholders is the number of values a key of f needs.
func (f *Family) Placeholders() int { return len(f.parts) - 1 }

var registry []*Family

// Families lists every family, in declaration order.
func Families() []*Family { return append([]*Family(nil), registry...) }

// Builder builds keys under an optional global prefix.
type Builder struct{ prefix string }

// NewBuilder returns a builder that puts prefix in front of every key. The
// prefix may hold letters, digits and ":_-." only, so it is safe in SCAN
// patterns.
func NewBuilder(prefix string) (Builder, error) {
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":_-.", r)) {
			return Builder{}, fmt.Errorf("keys: prefix %q: only letters, digits and \":_-.\" are allowed", prefix)
		}
	}
	return Builder{prefix: prefix}, nil
}

// Prefix is the global prefix ("" for none).
func (b Builder) Prefix() string { return b.prefix }

// Key builds the key of f from its values, in template order.
func (b Builder) Key(f *Family, values ...string) string {
	if len(values) != f.Placeholders() {
		panic(fmt.Sprintf("keys: %s needs %d values, got %d", f.Template, f.Placeholders(), len(values)))
	}
	var sb strings.Builder
	sb.WriteString(b.prefix)
	sb.WriteString(f.parts[0])
	for i, v := range values {
		sb.WriteString(v)
		sb.WriteString(f.parts[i+1])
	}
	return sb.String()
}

// Pattern is the SCAN pattern that matches every key of f (and, for a family
// whose name is a prefix of another's, those too: callers filter by Trim).
func (b Builder) Pattern(f *Family) string {
	if f.Placeholders() == 0 {
		return b.prefix + f.parts[0]
	}
	return b.prefix + f.Head() + "*"
}

// Trim returns the values part of key for a one-placeholder family, and
// whether key belongs to f.
func (b Builder) Trim(f *Family, key string) (string, bool) {
	if f.Placeholders() != 1 {
		return "", false
	}
	rest, ok := strings.CutPrefix(key, b.prefix+f.Head())
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, f.parts[1])
}
