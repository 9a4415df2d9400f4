package store

import (
	"embed"

	"github.com/eisland/isle/internal/kit/luascript"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFS embed.FS

// moneyLib is the decimal arithmetic of the scripts that change a balance
// (parse, fmt, less, add, sub, take), written once.
const moneyLib = "lib/money.lua"

// The Lua scripts, each loaded with the libraries it uses in front of it
// (luascript.Dir.Load). Script.Run sends EVALSHA and falls back to EVAL
// when the server lost its script cache (NOSCRIPT), as after a restart.
var (
	lua                = luascript.In(luaFS, "lua")
	deductScript       = lua.Load("deduct.lua", moneyLib)
	initBalanceScript  = lua.Load("init_balance.lua", moneyLib)
	settleScript       = lua.Load("settle.lua", moneyLib)
	resettleScript     = lua.Load("resettle.lua", moneyLib)
	resetBalanceScript = lua.Load("reset_balance.lua")
	cacheFillScript    = lua.Load("cache_fill.lua")
	banApplyScript     = lua.Load("ban_apply.lua")
	banSwapScript      = lua.Load("ban_swap.lua")
	codeIssueScript    = lua.Load("code_issue.lua")
	codeCheckScript    = lua.Load("code_check.lua")
	scoreSyncScript    = lua.Load("score_sync.lua")
	scoreBoardScript   = lua.Load("score_board_mark.lua")
	scoreClaimScript   = lua.Load("score_claim.lua")
	scoreReleaseScript = lua.Load("score_release.lua")
)
