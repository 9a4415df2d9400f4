package storetest

import (
	"context"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// Redis returns clients on the test Redis with a key prefix of the test's
// own; every key under it is deleted when the test ends.
func Redis(t testing.TB) *store.Redis {
	t.Helper()
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
	// CleanVolatile deletes its patterns under r's prefix: "*" in one
	// logical database of each index is everything of the test there.
	var all []store.CleanupPattern
	seen := map[*redis.Client]bool{}
	for _, db := range keys.DBs() {
		if c := r.Client(db); !seen[c] {
			seen[c] = true
			all = append(all, store.CleanupPattern{DB: db, Pattern: "*"})
		}
	}
	if _, err := r.CleanVolatile(context.Background(), all); err != nil {
		t.Errorf("storetest: wipe: %v", err)
	}
}
