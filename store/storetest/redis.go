package storetest

import (
	"context"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
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
		ctx := context.Background()
		seen := map[int]bool{}
		for _, db := range keys.DBs() {
			if seen[db.DefaultIndex()] {
				continue
			}
			seen[db.DefaultIndex()] = true
			c := r.Client(db)
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
		}
	})
	return r
}
