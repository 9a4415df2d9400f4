package keys

//go:generate go run ./gendoc -o ../../doc/keys.md

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Markdown renders the key registry: doc/keys.md (go generate ./store/keys
// writes it; a test holds it current).
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`# Redis keys

<!-- Generated from store/keys by "go generate ./store/keys"; do not edit. -->

Every key Isle reads or writes, built by store/keys only (no key is written
as a string at a call site), under an optional global prefix
(` + "`REDIS_KEY_PREFIX`" + `). Each family lives in one logical database; its
index comes from the variable the table names. A volatile family is a
cache: every binary deletes its keys when it starts
(` + "`REDIS_CACHE_CLEAR_ENABLED`" + `); persistent families (balances, markers,
limits, locks, the leader lease) are never deleted by a cleanup.

## Databases

| index | variable | holds |
| --- | --- | --- |
`)
	for _, db := range DBs() {
		fmt.Fprintf(&b, "| %d | `%s` | %s |\n", db.DefaultIndex(), db.EnvVar(), db.Purpose())
	}
	b.WriteString(`
## Key families

| key | database (variable) | TTL | kind |
| --- | --- | --- | --- |
`)
	for _, f := range Families() {
		ttl := "none, or set by its writer"
		if f.TTL > 0 {
			ttl = shortDuration(f.TTL)
		}
		kind := "persistent"
		if f.Volatile {
			kind = "volatile (cache)"
		}
		fmt.Fprintf(&b, "| `%s` | %d (`%s`) | %s | %s |\n", f.Template, f.DB.DefaultIndex(), f.DB.EnvVar(), ttl, kind)
	}
	return b.Bytes()
}

// shortDuration prints 168h0m0s as 168h, 30m0s as 30m, 1h30m0s as 1h30m;
// 10s stays 10s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
