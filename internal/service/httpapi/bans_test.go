package httpapi_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// banPeriod is how often the tests' API compares Redis's bans with MySQL's
// (the default is a few seconds). banSlack allows for a loaded machine.
const (
	banPeriod = 300 * time.Millisecond
	banSlack  = 3 * time.Second
)

// waitMe polls GET /v1/me as sub until it answers want, and returns how
// long that took; the test fails when it takes longer than limit.
func (b *testBundle) waitMe(t *testing.T, sub string, want int, limit time.Duration) time.Duration {
	t.Helper()
	tok := b.token(t, sub, httpapi.RoleUser)
	began := time.Now()
	var last atomic.Int64 // the condition runs in a goroutine of its own
	if !assert.Eventually(t, func() bool {
		status, _, _ := b.do(t, http.MethodGet, "/v1/me", tok, "")
		last.Store(int64(status))
		return status == want
	}, limit, 10*time.Millisecond) {
		t.Fatalf("%s still gets %d %s after Redis changed, want %d", sub, last.Load(), limit, want)
	}
	return time.Since(began)
}

// banKeys is a snapshot of the ban database's keys, as DUMP gives them.
type banKeys map[string]string

func dumpBans(t *testing.T, r *store.Redis) banKeys {
	t.Helper()
	c := r.Client(keys.DBUserBan)
	names, err := c.Keys(t.Context(), r.Keys().Prefix()+"*").Result()
	require.NoError(t, err)
	snap := banKeys{}
	for _, k := range names {
		v, err := c.Dump(t.Context(), k).Result()
		require.NoError(t, err)
		snap[k] = v
	}
	require.NotEmpty(t, snap)
	return snap
}

// restoreBans puts the ban database back as snap had it, as a Redis that
// restarts from an older RDB or AOF would.
func restoreBans(t *testing.T, r *store.Redis, snap banKeys) {
	t.Helper()
	c := r.Client(keys.DBUserBan)
	names, err := c.Keys(t.Context(), r.Keys().Prefix()+"*").Result()
	require.NoError(t, err)
	require.NoError(t, c.Del(t.Context(), names...).Err())
	for k, v := range snap {
		require.NoError(t, c.Restore(t.Context(), k, 0, v).Err())
	}
}

// A Redis that loses its data while the API runs loses the bans with it;
// the API notices and refuses the banned user again within the period.
func TestBannedUserIsRefusedAgainSoonAfterRedisIsWiped(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.NoError(t, store.NewBans(b.db, b.redis).Ban(t.Context(), "carol", "abuse"))
	b.waitMe(t, "carol", http.StatusForbidden, banSlack)

	storetest.Wipe(t, b.redis) // Redis restarted without its data
	took := b.waitMe(t, "carol", http.StatusForbidden, banPeriod+banSlack)
	t.Logf("refused again %s after the wipe", took)
	require.NotZero(t, b.metric(t, "isle_ban_checks_mysql_total", nil), "MySQL answered while Redis had no list")
	wiped := time.Now().Add(-took)
	require.Eventually(t, func() bool {
		banned, err := store.NewBans(nil, b.redis).IsBanned(t.Context(), "carol")
		return err == nil && banned
	}, banPeriod+banSlack, 10*time.Millisecond, "Redis holds the ban again")
	t.Logf("Redis holds the ban again %s after the wipe (check period %s)", time.Since(wiped), banPeriod)
	b.waitMe(t, "dave", http.StatusOK, banSlack)
}

// A Redis that comes back from an older snapshot lacks the bans since and
// holds users unbanned since: within the period the API refuses the first
// and admits the second again.
func TestBansAndUnbansSinceAnOlderRedisSnapshotHoldSoon(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.NoError(t, store.NewBans(b.db, b.redis).Ban(t.Context(), "alice", ""))
	snap := dumpBans(t, b.redis)
	require.NoError(t, store.NewBans(b.db, b.redis).Ban(t.Context(), "bob", ""))
	_, err := store.NewBans(b.db, b.redis).Unban(t.Context(), "alice")
	require.NoError(t, err)
	b.waitMe(t, "bob", http.StatusForbidden, banSlack)
	b.waitMe(t, "alice", http.StatusOK, banSlack)

	restoreBans(t, b.redis, snap)
	restored := time.Now()
	took := b.waitMe(t, "bob", http.StatusForbidden, banPeriod+banSlack)
	t.Logf("bob, banned since the snapshot, refused %s after the restore", took)
	took = b.waitMe(t, "alice", http.StatusOK, banPeriod+banSlack)
	t.Logf("alice, unbanned since the snapshot, admitted %s after bob's refusal", took)
	require.Eventually(t, func() bool {
		bob, err1 := store.NewBans(nil, b.redis).IsBanned(t.Context(), "bob")
		alice, err2 := store.NewBans(nil, b.redis).IsBanned(t.Context(), "alice")
		return err1 == nil && err2 == nil && bob && !alice
	}, banPeriod+banSlack, 10*time.Millisecond, "Redis holds MySQL's bans again")
	t.Logf("Redis holds MySQL's bans again %s after the restore (check period %s)", time.Since(restored), banPeriod)
}
