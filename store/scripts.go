package store

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFS embed.FS

// moneyLib is the decimal arithmetic of the scripts that change a balance
// (parse, fmt, less, add, sub, take), written once.
const moneyLib = "lib/money.lua"

// script loads lua/name with the libraries it uses in front of it, as one
// source: a library's local functions are the script's own, and the script
// keeps its KEYS/ARGV contract at the top of its file.
func script(name string, libs ...string) *redis.Script {
	var src []byte
	for _, f := range append(libs[:len(libs):len(libs)], name) {
		b, err := luaFS.ReadFile("lua/" + f)
		if err != nil {
			panic("store: missing embedded script " + f) // a build defect, caught by every test
		}
		src = append(src, b...)
	}
	return redis.NewScript(string(src))
}

// The Lua scripts. Script.Run sends EVALSHA and falls back to EVAL when the
// server lost its script cache (NOSCRIPT), as after a restart.
var (
	deductScript       = script("deduct.lua", moneyLib)
	initBalanceScript  = script("init_balance.lua", moneyLib)
	settleScript       = script("settle.lua", moneyLib)
	resettleScript     = script("resettle.lua", moneyLib)
	resetBalanceScript = script("reset_balance.lua")
	cacheFillScript    = script("cache_fill.lua")
	banApplyScript     = script("ban_apply.lua")
	banSwapScript      = script("ban_swap.lua")
	codeIssueScript    = script("code_issue.lua")
	codeCheckScript    = script("code_check.lua")
	scoreSyncScript    = script("score_sync.lua")
	scoreBoardScript   = script("score_board_mark.lua")
	scoreClaimScript   = script("score_claim.lua")
	scoreReleaseScript = script("score_release.lua")
)
