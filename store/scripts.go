package store

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

func script(name string) *redis.Script {
	src, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("store: missing embedded script " + name) // a build defect, caught by every test
	}
	return redis.NewScript(string(src))
}

// The Lua scripts. Script.Run sends EVALSHA and falls back to EVAL when the
// server lost its script cache (NOSCRIPT), as after a restart.
var (
	deductScript       = script("deduct.lua")
	tokenBucketScript  = script("token_bucket.lua")
	incrWindowScript   = script("incr_window.lua")
	unlockScript       = script("unlock.lua")
	renewScript        = script("renew.lua")
	slidingScript      = script("sliding_window.lua")
	initBalanceScript  = script("init_balance.lua")
	settleScript       = script("settle.lua")
	resettleScript     = script("resettle.lua")
	resetBalanceScript = script("reset_balance.lua")
	cacheFillScript    = script("cache_fill.lua")
	banApplyScript     = script("ban_apply.lua")
	banSwapScript      = script("ban_swap.lua")
)
