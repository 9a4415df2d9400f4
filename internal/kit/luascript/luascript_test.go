package luascript_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"testing/fstest"

	"github.com/eisland/isle/internal/kit/luascript"
	"github.com/eisland/isle/store/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The libraries come first, in the order given, then the script: one
// source, hashed as Redis hashes it.
func TestLoadPutsTheLibrariesFirst(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"lua/lib/a.lua": {Data: []byte("local function a() return 1 end\n")},
		"lua/lib/b.lua": {Data: []byte("local function b() return 2 end\n")},
		"lua/sum.lua":   {Data: []byte("return a() + b()\n")},
	}
	s := luascript.In(fsys, "lua").Load("sum.lua", "lib/a.lua", "lib/b.lua")
	sum := sha1.Sum([]byte("local function a() return 1 end\nlocal function b() return 2 end\nreturn a() + b()\n"))
	require.Equal(t, hex.EncodeToString(sum[:]), s.Hash())

	alone := luascript.In(fsys, "lua").Load("lib/a.lua")
	sum = sha1.Sum([]byte("local function a() return 1 end\n"))
	require.Equal(t, hex.EncodeToString(sum[:]), alone.Hash(), "no library: the script alone")
}

// A loaded script's name is found by the SHA-1 EVALSHA sends (for its
// span); an unknown hash has none.
func TestNameOfALoadedScript(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"lua/named.lua": {Data: []byte("return 'named'\n")}}
	s := luascript.In(fsys, "lua").Load("named.lua")
	require.Equal(t, "named.lua", luascript.Name(s.Hash()))
	require.Empty(t, luascript.Name("0000000000000000000000000000000000000000"))
}

func TestLoadPanicsOnAMissingFile(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"lua/x.lua": {Data: []byte("return 1\n")}}
	require.PanicsWithValue(t, "luascript: missing embedded script: open lua/y.lua: file does not exist",
		func() { luascript.In(fsys, "lua").Load("y.lua") })
	require.Panics(t, func() { luascript.In(fsys, "lua").Load("x.lua", "lib/none.lua") }, "a missing library too")
}

// A script the server has never seen runs: Run's EVALSHA is answered
// NOSCRIPT and it sends EVAL; the next Run finds it cached.
func TestLoadedScriptRunsOnRedis(t *testing.T) {
	t.Parallel()
	storetest.Services(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: storetest.RedisAddr()})
	t.Cleanup(func() { _ = c.Close() })
	key := storetest.Unique("luascript-test:") + ":counter"
	t.Cleanup(func() { _ = c.Del(context.Background(), key).Err() })

	// A comment of the test's own makes a source, and so a SHA1, that no
	// other run has loaded.
	fsys := fstest.MapFS{
		"lua/lib/incr.lua": {Data: []byte("-- " + key + "\nlocal function incr(k, n) return redis.call('INCRBY', k, n) end\n")},
		"lua/add.lua":      {Data: []byte("return incr(KEYS[1], ARGV[1])\n")},
	}
	s := luascript.In(fsys, "lua").Load("add.lua", "lib/incr.lua")
	exists, err := s.Exists(ctx, c).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, exists, "not in the server's cache yet")

	n, err := s.Run(ctx, c, []string{key}, 2).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	exists, err = s.Exists(ctx, c).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{true}, exists, "EVAL cached it")
	n, err = s.Run(ctx, c, []string{key}, 3).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
}
