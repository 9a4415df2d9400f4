package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keyclean"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// Redis returns clients on the test Redis with a key prefix of the test's
// own; every key under it is deleted when the test ends.
func Redis(t testing.TB) *store.Redis {
	t.Helper()
	Services(t)
	prefix := Unique("isletest:") + ":"
	r, err := store.OpenRedis(store.RedisConfig{Addr: RedisAddr(), KeyPrefix: prefix})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	if err := r.Ping(context.Background()); err != nil {
		t.Fatalf("storetest: Redis at %s is not reachable (scripts/test starts it): %v", RedisAddr(), err)
	}
	t.Cleanup(func() {
		defer r.Close()
		Wipe(t, r)
	})
	return r
}

// T is the part of a test Wipe needs: testing.TB, or a rapid.T.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// Wipe deletes every key under r's prefix in every database, as a Redis
// restart without persistence would (script cache aside).
func Wipe(t T, r *store.Redis) {
	t.Helper()
	if r.Keys().Prefix() == "" {
		t.Fatal("storetest: Wipe refuses a Redis without a key prefix")
	}
	// keyclean.Volatile deletes its patterns under r's prefix: "*" in one
	// logical database of each index is everything of the test there.
	var all []keyclean.Pattern
	seen := map[*redis.Client]bool{}
	for _, db := range keys.DBs() {
		if c := r.Client(db); !seen[c] {
			seen[c] = true
			all = append(all, keyclean.Pattern{DB: db, Pattern: "*"})
		}
	}
	if _, err := keyclean.Volatile(context.Background(), r, all); err != nil {
		t.Errorf("storetest: wipe: %v", err)
	}
}

// Snapshot is every key under a Redis's prefix at one moment, as an RDB
// file, an AOF or a lagging replica would bring it back.
type Snapshot struct {
	r    *store.Redis
	keys map[*redis.Client]map[string]dumped
}

type dumped struct {
	value string
	ttl   int64 // ms; 0 = none
}

// TakeSnapshot dumps every key under r's prefix in every database.
func TakeSnapshot(t T, r *store.Redis) *Snapshot {
	t.Helper()
	ctx := context.Background()
	s := &Snapshot{r: r, keys: map[*redis.Client]map[string]dumped{}}
	for _, db := range keys.DBs() {
		c := r.Client(db)
		if _, ok := s.keys[c]; ok {
			continue
		}
		m := map[string]dumped{}
		iter := c.Scan(ctx, 0, r.Keys().Prefix()+"*", 500).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			v, err := c.Dump(ctx, k).Result()
			if err == redis.Nil {
				continue // expired meanwhile
			}
			if err != nil {
				t.Fatal(err)
			}
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			m[k] = dumped{value: v, ttl: max(ttl.Milliseconds(), 0)}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		s.keys[c] = m
	}
	return s
}

// Restore replaces everything under the prefix with the snapshot: keys
// written since are gone, keys changed since are back as they were.
func (s *Snapshot) Restore(t T) {
	t.Helper()
	Wipe(t, s.r)
	ctx := context.Background()
	for c, m := range s.keys {
		for k, d := range m {
			if err := c.RestoreReplace(ctx, k, time.Duration(d.ttl)*time.Millisecond, d.value).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
