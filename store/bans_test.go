package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// generations returns MySQL's and Redis's ban generations.
func generations(t *testing.T, db *gorm.DB, r *store.Redis) (mysql, redis int64) {
	t.Helper()
	mysql, err := store.NewBans(db, nil).Generation(t.Context())
	require.NoError(t, err)
	redis, err = store.NewBans(nil, r).HotGeneration(t.Context())
	require.NoError(t, err)
	return mysql, redis
}

func banned(t *testing.T, r *store.Redis, user string) bool {
	t.Helper()
	b, err := store.NewBans(nil, r).IsBanned(t.Context(), user)
	require.NoError(t, err)
	return b
}

// Each ban and unban advances the generation in MySQL and, in order, in
// Redis, which then reads as current.
func TestBansAndUnbansAdvanceTheGenerationInStep(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	m, rg := generations(t, db, r)
	require.Equal(t, [2]int64{0, -1}, [2]int64{m, rg}, "no change yet; Redis holds no list")
	res, err := store.NewBans(db, r).Rebuild(t.Context(), -1)
	require.NoError(t, err)
	require.Equal(t, store.BanRebuild{Users: 0, Generation: 0, Replaced: true}, res)

	require.NoError(t, store.NewBans(db, r).Ban(t.Context(), "ann", "spam"))
	require.NoError(t, store.NewBans(db, r).Ban(t.Context(), "ben", ""))
	was, err := store.NewBans(db, r).Unban(t.Context(), "ann")
	require.NoError(t, err)
	require.True(t, was)
	was, err = store.NewBans(db, r).Unban(t.Context(), "nobody")
	require.NoError(t, err)
	require.False(t, was)
	m, rg = generations(t, db, r)
	require.Equal(t, [2]int64{4, 4}, [2]int64{m, rg})
	require.False(t, banned(t, r, "ann"))
	require.True(t, banned(t, r, "ben"))
	st, err := store.NewBans(nil, r).State(t.Context(), "ben")
	require.NoError(t, err)
	require.Equal(t, store.BanState{Banned: true, Generation: 4}, st)
}

// A ban whose Redis write failed stands in MySQL; a later ban that reaches
// Redis does not hide it (Redis's generation stays behind), and a rebuild
// puts it in.
func TestABanRedisMissedLeavesItsGenerationBehindUntilARebuild(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	proxy := storetest.NewProxy(t, storetest.RedisAddr())
	down, err := store.OpenRedis(store.RedisConfig{Addr: proxy.Addr(), KeyPrefix: r.Keys().Prefix(), Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { down.Close() })
	_, err = store.NewBans(db, r).Rebuild(t.Context(), -1)
	require.NoError(t, err)

	proxy.Down()
	require.ErrorContains(t, store.NewBans(db, down).Ban(t.Context(), "cat", ""), "recorded in MySQL")
	require.NoError(t, store.NewBans(db, r).Ban(t.Context(), "dan", ""))
	inMySQL, err := store.NewBans(db, nil).BannedInMySQL(t.Context(), "cat")
	require.NoError(t, err)
	require.True(t, inMySQL)
	require.False(t, banned(t, r, "cat"))
	m, rg := generations(t, db, r)
	require.Equal(t, [2]int64{2, 0}, [2]int64{m, rg}, "dan's change came out of order: Redis stays behind")

	res, err := store.NewBans(db, r).Rebuild(t.Context(), rg)
	require.NoError(t, err)
	require.Equal(t, store.BanRebuild{Users: 2, Generation: 2, Replaced: true}, res)
	require.True(t, banned(t, r, "cat"))
	require.True(t, banned(t, r, "dan"))
	m, rg = generations(t, db, r)
	require.Equal(t, [2]int64{2, 2}, [2]int64{m, rg})
}

// A rebuild that finds Redis changed since it began leaves the newer list
// alone, and its own keys go.
func TestARebuildLeavesANewerListAlone(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	_, err := store.NewBans(db, r).Rebuild(t.Context(), -1)
	require.NoError(t, err)
	require.NoError(t, store.NewBans(db, r).Ban(t.Context(), "eve", ""))

	res, err := store.NewBans(db, r).Rebuild(t.Context(), 0) // began when Redis held 0
	require.NoError(t, err)
	require.False(t, res.Replaced)
	_, rg := generations(t, db, r)
	require.EqualValues(t, 1, rg)
	c := r.Client(keys.DBUserBan)
	left, err := c.Keys(t.Context(), r.Keys().Prefix()+"user:ban:rebuild:*").Result()
	require.NoError(t, err)
	require.Empty(t, left)
}

// A rebuild drops the users unbanned since an older list, Bloom bits
// included, and with no bans at all leaves no list keys but the generation.
func TestARebuildDropsLiftedBansAndTheirBloomBits(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	require.NoError(t, store.NewBans(db, r).Ban(t.Context(), "fay", ""))
	_, err := store.NewBans(db, r).Unban(t.Context(), "fay")
	require.NoError(t, err)
	c, k := r.Client(keys.DBUserBan), r.Keys()
	// An older list that still holds fay.
	require.NoError(t, c.SAdd(t.Context(), k.BanSet(), "fay").Err())
	require.True(t, banned(t, r, "fay"))
	bits, err := c.BitCount(t.Context(), k.BanBloom(), nil).Result()
	require.NoError(t, err)
	require.NotZero(t, bits)

	res, err := store.NewBans(db, r).Rebuild(t.Context(), -1)
	require.NoError(t, err)
	require.Equal(t, store.BanRebuild{Users: 0, Generation: 2, Replaced: true}, res)
	require.False(t, banned(t, r, "fay"))
	n, err := c.Exists(t.Context(), k.BanSet(), k.BanBloom()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no bans: no set and no bitmap")
	ttl, err := c.PTTL(t.Context(), k.BanGeneration()).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "the generation is persistent")
}

// A rebuilt list of many users is exact, persistent, and read in one go.
func TestARebuiltListHoldsEveryBan(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	const n = 1203 // more than two pipelines
	rows := make([]store.UserBan, n)
	for i := range rows {
		rows[i] = store.UserBan{Username: fmt.Sprintf("u%04d", i), BannedAt: time.Now().UTC()}
	}
	require.NoError(t, db.CreateInBatches(rows, 500).Error)
	res, err := store.NewBans(db, r).Rebuild(t.Context(), -1)
	require.NoError(t, err)
	require.Equal(t, n, res.Users)
	c, k := r.Client(keys.DBUserBan), r.Keys()
	size, err := c.SCard(t.Context(), k.BanSet()).Result()
	require.NoError(t, err)
	require.EqualValues(t, n, size)
	for _, key := range []string{k.BanSet(), k.BanBloom()} {
		ttl, err := c.PTTL(t.Context(), key).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl, "%s keeps no rebuild TTL", key)
	}
	require.True(t, banned(t, r, rows[n-1].Username))
	require.False(t, banned(t, r, "not-banned"))
}

// List returns every ban, the oldest first, with its reason; a lifted one
// is gone.
func TestBansListTheOldestFirst(t *testing.T) {
	t.Parallel()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	bans := store.NewBans(db, r)
	for _, u := range []string{"cy", "ann", "bo"} {
		require.NoError(t, bans.Ban(t.Context(), u, "spam by "+u))
	}
	require.NoError(t, db.Exec("UPDATE user_ban SET banned_at = banned_at - INTERVAL 1 HOUR WHERE username = 'bo'").Error)
	_, err := bans.Unban(t.Context(), "ann")
	require.NoError(t, err)
	list, err := store.NewBans(db, nil).List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []string{"bo", "cy"}, []string{list[0].Username, list[1].Username})
	require.Equal(t, "spam by bo", list[0].Reason)
}
