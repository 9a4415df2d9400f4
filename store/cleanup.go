package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/eisland/isle/store/keys"
)

// CleanupPattern is an extra SCAN pattern deleted by the start-up cleanup,
// such as keys a previous version left behind. Pattern is relative to the
// global key prefix.
type CleanupPattern struct {
	DB      keys.DB
	Pattern string
}

// ParseCleanupPattern reads "DB/pattern", where DB is a database index
// (e.g. "13/legacy:pricing:*"). A pattern that could match a key of a
// persistent family in that database is refused: the cleanup must never
// delete balances, limits, markers or locks.
func ParseCleanupPattern(s string, databases map[keys.DB]int) (CleanupPattern, error) {
	idx, pattern, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(idx)
	if !ok || err != nil || pattern == "" {
		return CleanupPattern{}, fmt.Errorf("cleanup pattern %q: want DB/pattern, e.g. 13/legacy:*", s)
	}
	var matched []keys.DB
	for _, db := range keys.DBs() {
		if indexOf(db, databases) == n {
			matched = append(matched, db)
		}
	}
	if len(matched) == 0 {
		return CleanupPattern{}, fmt.Errorf("cleanup pattern %q: database %d is not one of Isle's", s, n)
	}
	for _, f := range keys.Families() {
		if f.Volatile || indexOf(f.DB, databases) != n {
			continue
		}
		if overlaps(pattern, f) {
			return CleanupPattern{}, fmt.Errorf("cleanup pattern %q: would delete persistent keys %s", s, f.Template)
		}
	}
	return CleanupPattern{DB: matched[0], Pattern: pattern}, nil
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

func indexOf(db keys.DB, databases map[keys.DB]int) int {
	if i, ok := databases[db]; ok {
		return i
	}
	return db.DefaultIndex()
}

// CleanupResult counts what CleanVolatile deleted, by SCAN pattern.
type CleanupResult map[string]int64

// CleanVolatile deletes every key of the volatile families (caches), and the
// extra patterns, under the configured prefix (seed 001 section 3). It scans
// in batches and unlinks what it finds; persistent families are never touched.
func (r *Redis) CleanVolatile(ctx context.Context, extra []CleanupPattern) (CleanupResult, error) {
	todo := extra
	for _, f := range keys.Families() {
		if f.Volatile {
			todo = append(todo, CleanupPattern{DB: f.DB, Pattern: strings.TrimPrefix(r.keys.Pattern(f), r.keys.Prefix())})
		}
	}
	res := make(CleanupResult)
	for _, p := range todo {
		c := r.Client(p.DB)
		pattern := r.keys.Prefix() + p.Pattern
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
					return res, fmt.Errorf("store: clean %s: %w", pattern, err)
				}
			}
		}
		if err := iter.Err(); err != nil {
			return res, fmt.Errorf("store: clean %s: %w", pattern, err)
		}
		if err := flush(); err != nil {
			return res, fmt.Errorf("store: clean %s: %w", pattern, err)
		}
	}
	return res, nil
}
