package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// State is what a test can see of its own MySQL database, Redis prefix and
// directories at one moment: each table's row count and CHECKSUM TABLE,
// each key under the prefix with a digest of its value (DUMP) and whether
// it has a TTL (the TTL itself moves by the clock), and each file with the
// SHA-256 of its content. Two States differ where a step changed
// something: the bad-input tables (doc/badinput.md) take one before and
// after each case.
type State struct {
	Tables map[string]string // table -> "rows=N checksum=C"
	Keys   map[string]string // "<db index>/<key>" -> digest of the value, "+ttl" when it expires
	Files  map[string]string // path -> SHA-256 of the content
}

// TakeState reads the State of db (every table of its current database),
// r (every key under its prefix, in every database it uses) and dirs
// (every file under them: an object store's, a mailer's).
func TakeState(t testing.TB, db *gorm.DB, r *store.Redis, dirs ...string) State {
	t.Helper()
	return State{Tables: tableState(t, db), Keys: keyState(t, r), Files: fileState(t, dirs)}
}

func fileState(t testing.TB, dirs []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(raw)
			out[path] = hex.EncodeToString(sum[:])
			return nil
		})
		if err != nil {
			t.Fatalf("storetest: read the files under %s: %v", dir, err)
		}
	}
	return out
}

func tableState(t testing.TB, db *gorm.DB) map[string]string {
	t.Helper()
	var tables []string
	if err := db.Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name").
		Scan(&tables).Error; err != nil {
		t.Fatalf("storetest: list tables: %v", err)
	}
	out := make(map[string]string, len(tables))
	if len(tables) == 0 {
		return out
	}
	quoted := make([]string, len(tables))
	counts := make([]string, len(tables))
	for i, tbl := range tables {
		quoted[i] = "`" + tbl + "`"
		counts[i] = fmt.Sprintf("SELECT '%s' AS tbl, COUNT(*) AS n FROM `%s`", tbl, tbl)
	}
	var rows []struct {
		Tbl string
		N   int64
	}
	if err := db.Raw(strings.Join(counts, " UNION ALL ")).Scan(&rows).Error; err != nil {
		t.Fatalf("storetest: count rows: %v", err)
	}
	n := make(map[string]int64, len(rows))
	for _, r := range rows {
		n[r.Tbl] = r.N
	}
	sums, err := db.Raw("CHECKSUM TABLE " + strings.Join(quoted, ", ")).Rows()
	if err != nil {
		t.Fatalf("storetest: checksum tables: %v", err)
	}
	defer sums.Close()
	for sums.Next() {
		var name string
		var sum *int64
		if err := sums.Scan(&name, &sum); err != nil {
			t.Fatalf("storetest: checksum tables: %v", err)
		}
		_, tbl, _ := strings.Cut(name, ".") // "database.table"
		c := "none"
		if sum != nil {
			c = fmt.Sprint(*sum)
		}
		out[tbl] = fmt.Sprintf("rows=%d checksum=%s", n[tbl], c)
	}
	if err := sums.Err(); err != nil {
		t.Fatalf("storetest: checksum tables: %v", err)
	}
	return out
}

func keyState(t testing.TB, r *store.Redis) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	seen := map[*redis.Client]bool{}
	for _, db := range keys.DBs() {
		c := r.Client(db)
		if seen[c] {
			continue
		}
		seen[c] = true
		iter := c.Scan(ctx, 0, r.Keys().Prefix()+"*", 500).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			v, err := c.Dump(ctx, k).Result()
			if err == redis.Nil {
				continue // expired meanwhile
			}
			if err != nil {
				t.Fatalf("storetest: dump %s: %v", k, err)
			}
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatalf("storetest: ttl of %s: %v", k, err)
			}
			sum := sha256.Sum256([]byte(v))
			d := hex.EncodeToString(sum[:8])
			if ttl > 0 {
				d += "+ttl"
			}
			out[fmt.Sprintf("%d/%s", c.Options().DB, k)] = d
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("storetest: scan: %v", err)
		}
	}
	return out
}

// Diff lists what changed from s to after, one line per table, key or
// file: the tables, then the keys, then the files, each sorted; a key that
// skip reports true for (given the key without its "<db index>/") is left
// out.
func (s State) Diff(after State, skip func(key string) bool) []string {
	var out []string
	for _, name := range unionKeys(s.Tables, after.Tables) {
		if a, b := s.Tables[name], after.Tables[name]; a != b {
			out = append(out, fmt.Sprintf("table %s: %s -> %s", name, orNone(a), orNone(b)))
		}
	}
	for _, name := range unionKeys(s.Keys, after.Keys) {
		_, key, _ := strings.Cut(name, "/")
		if skip != nil && skip(key) {
			continue
		}
		a, b := s.Keys[name], after.Keys[name]
		switch {
		case a == "":
			out = append(out, "key "+name+": added")
		case b == "":
			out = append(out, "key "+name+": deleted")
		case a != b:
			out = append(out, "key "+name+": changed")
		}
	}
	for _, name := range unionKeys(s.Files, after.Files) {
		switch a, b := s.Files[name], after.Files[name]; {
		case b == "":
			out = append(out, "file "+name+": deleted")
		case a != b:
			out = append(out, "file "+name+": written")
		}
	}
	return out
}

func unionKeys(a, b map[string]string) []string {
	all := make([]string, 0, len(a)+len(b))
	for k := range a {
		all = append(all, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			all = append(all, k)
		}
	}
	sort.Strings(all)
	return all
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// MayMove are the key families an input that is refused may still change
// (doc/badinput.md): the rate-limit and attempt counters, which count every
// request that reaches them, refused or not, by design (a limit that
// ignored refusals would let a client probe for free; 5 wrong codes lock a
// code), and the caches (Volatile families), which any read may fill from
// MySQL. Every other key must stay as it was: the upload limits among
// them, which count accepted uploads only.
func MayMove() []*keys.Family {
	out := []*keys.Family{
		keys.VerifyAttempts, keys.VerifyRateIP, keys.VerifyRateHour, keys.VerifyRateDay,
		keys.IdentityRate, keys.LoginFailures, keys.LoginLock, keys.RegisterAttempts,
		keys.ScoreSubmitRate, keys.LeaderboardRefresh,
	}
	for _, f := range keys.Families() {
		if f.Volatile {
			out = append(out, f)
		}
	}
	return out
}

// InFamilies returns a test of whether a key of r (with r's prefix) is one
// of fams'.
func InFamilies(r *store.Redis, fams ...*keys.Family) func(key string) bool {
	var pats []*regexp.Regexp
	placeholder := regexp.MustCompile(`\\\{[^}]*\\\}`) // a {name}, as QuoteMeta writes it
	for _, f := range fams {
		lit := regexp.QuoteMeta(r.Keys().Prefix() + f.Template)
		pats = append(pats, regexp.MustCompile("^"+placeholder.ReplaceAllString(lit, ".+")+"$"))
	}
	return func(key string) bool {
		for _, p := range pats {
			if p.MatchString(key) {
				return true
			}
		}
		return false
	}
}
