// Package keyclean is the start-up cleanup of the volatile key namespace
// (the key policy: caches are deleted when a binary starts, persistent keys
// never): it deletes every key of the volatile families of store/keys, and
// extra patterns an operator names, refusing any that could reach a
// persistent family.
package keyclean

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
)

// Pattern is an extra SCAN pattern deleted by the start-up cleanup,
// such as keys a previous version left behind. Pattern is relative to the
// global key prefix.
type Pattern struct {
	DB      keys.DB
	Pattern string
}

// ParsePattern reads "DB/pattern", where DB is a database index
// (e.g. "13/legacy:pricing:*"). A pattern that could match a key of a
// persistent family in that database is refused: the cleanup must never
// delete balances, limits, markers or locks.
func ParsePattern(s string, databases map[keys.DB]int) (Pattern, error) {
	idx, pattern, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(idx)
	if !ok || err != nil || pattern == "" {
		return Pattern{}, fmt.Errorf("cleanup pattern %q: want DB/pattern, e.g. 13/legacy:*", s)
	}
	var matched []keys.DB
	for _, db := range keys.DBs() {
		if db.IndexIn(databases) == n {
			matched = append(matched, db)
		}
	}
	if len(matched) == 0 {
		return Pattern{}, fmt.Errorf("cleanup pattern %q: database %d is not one of Isle's", s, n)
	}
	for _, f := range keys.Families() {
		if f.Volatile || f.DB.IndexIn(databases) != n {
			continue
		}
		if overlaps(pattern, f) {
			return Pattern{}, fmt.Errorf("cleanup pattern %q: would delete persistent keys %s", s, f.Template)
		}
	}
	return Pattern{DB: matched[0], Pattern: pattern}, nil
}

// overlaps reports whether pattern could match a key of f: the pattern's
// literal head and the family's literal head must not extend one another.
func overlaps(pattern string, f *keys.Family) bool {
	literal := pattern
	if i := strings.IndexAny(pattern, `*?[\`); i >= 0 {
		literal = pattern[:i]
	}
	head := f.Head()
	return strings.HasPrefix(head, literal) || strings.HasPrefix(literal, head)
}

// Result counts what Volatile deleted, by SCAN pattern.
type Result map[string]int64

// Volatile deletes every key of the volatile families (caches), and the
// extra patterns, under r's key prefix. It scans in batches and unlinks
// what it finds; persistent families are never touched.
func Volatile(ctx context.Context, r *store.Redis, extra []Pattern) (Result, error) {
	todo := extra
	for _, f := range keys.Families() {
		if f.Volatile {
			todo = append(todo, Pattern{DB: f.DB, Pattern: strings.TrimPrefix(r.Keys().Pattern(f), r.Keys().Prefix())})
		}
	}
	res := make(Result)
	for _, p := range todo {
		c := r.Client(p.DB)
		pattern := r.Keys().Prefix() + p.Pattern
		res[pattern] += 0 // counted even when nothing matched
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		batch := make([]string, 0, 500)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			n, err := c.Unlink(ctx, batch...).Result()
			res[pattern] += n
			batch = batch[:0]
			return err
		}
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == cap(batch) {
				if err := flush(); err != nil {
					return res, fmt.Errorf("keyclean: clean %s: %w", pattern, err)
				}
			}
		}
		if err := iter.Err(); err != nil {
			return res, fmt.Errorf("keyclean: clean %s: %w", pattern, err)
		}
		if err := flush(); err != nil {
			return res, fmt.Errorf("keyclean: clean %s: %w", pattern, err)
		}
	}
	return res, nil
}
