package keys_test

import (
	"testing"

	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

func TestSeedKeyNames(t *testing.T) {
	t.Parallel()
	b, err := keys.NewBuilder("")
	require.NoError(t, err)
	for want, got := range map[string]string{
		"agent:balance:alice":                        b.AgentBalance("alice"),
		"agent:pricing:deepseek-chat":                b.AgentPricing("deepseek-chat"),
		"agent:usage:deepseek-chat":                  b.AgentUsage("deepseek-chat"),
		"agent:usage:__models__":                     b.AgentUsageModels(),
		"user:ban:bloom":                             b.BanBloom(),
		"user:ban:set":                               b.BanSet(),
		"user:ban:generation":                        b.BanGeneration(),
		"user:ban:rebuild:set:r1":                    b.BanSetRebuild("r1"),
		"user:ban:rebuild:bloom:r1":                  b.BanBloomRebuild("r1"),
		"mg:score:submit:rate:2048:42":               b.ScoreSubmitRate("2048", "42"),
		"payment:lock:create:agent-recharge:bob":     b.OrderCreateLock("agent-recharge", "bob"),
		"verify:code:LOGIN:a@b.c":                    b.Key(keys.VerifyCode, "LOGIN", "a@b.c"),
		"auth:replay:alice:POST:/v1/x:n1":            b.Key(keys.ReplayNonce, "alice", "POST", "/v1/x", "n1"),
		"payment:notify:done:WECHAT:o1:t1":           b.Key(keys.NotifyDone, "WECHAT", "o1", "t1"),
		"mg:score:session:2048:42:s1":                b.Key(keys.GameSession, "2048", "42", "s1"),
		"mg:score:leaderboard:refresh:rate:snake:42": b.Key(keys.LeaderboardRefresh, "snake", "42"),
	} {
		require.Equal(t, want, got)
	}
}

func TestPrefixAndPatterns(t *testing.T) {
	t.Parallel()
	b, err := keys.NewBuilder("t1:")
	require.NoError(t, err)
	require.Equal(t, "t1:agent:balance:alice", b.AgentBalance("alice"))
	require.Equal(t, "t1:agent:balance:*", b.Pattern(keys.AgentBalance))
	require.Equal(t, "t1:mg:score:high:*", b.Pattern(keys.HighScore))
	require.Equal(t, "t1:user:ban:set", b.Pattern(keys.BanSet))
	user, ok := b.Trim(keys.AgentBalance, "t1:agent:balance:alice")
	require.True(t, ok)
	require.Equal(t, "alice", user)
	_, ok = b.Trim(keys.AgentBalance, "t1:agent:pending:alice")
	require.False(t, ok)

	for _, bad := range []string{"a b", "x*", "q?", "[x]"} {
		_, err := keys.NewBuilder(bad)
		require.Error(t, err, bad)
	}
	require.Panics(t, func() { b.Key(keys.VerifyCode, "LOGIN") }, "a key needs all its values")
}

func TestFamiliesAreConsistent(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, f := range keys.Families() {
		require.False(t, seen[f.Template], "duplicate %s", f.Template)
		seen[f.Template] = true
		if f.Volatile {
			require.NotZero(t, f.TTL, "a cache %s must expire", f.Template)
		}
	}
	require.False(t, keys.LeaderLease.Volatile, "the key policy: the leader lease is persistent")
	require.False(t, keys.AgentBalance.Volatile)
	for _, f := range []*keys.Family{keys.BanBloom, keys.BanSet, keys.BanGeneration, keys.BanBloomRebuild, keys.BanSetRebuild} {
		require.Equal(t, keys.DBUserBan, f.DB, f.Template)
		require.False(t, f.Volatile, "%s: the ban list is no cache; the start-up cleanup must not empty it", f.Template)
	}
	require.NotZero(t, keys.BanSetRebuild.TTL, "a rebuild left behind expires")
	require.Len(t, keys.DBs(), 16, "15 databases; verify and identity share index 2")
	idx := map[int]bool{}
	for _, db := range keys.DBs() {
		idx[db.DefaultIndex()] = true
		require.NotEmpty(t, db.EnvVar())
	}
	require.Len(t, idx, 15)
}
