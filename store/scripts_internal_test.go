package store

import (
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The money arithmetic is written once, in lib/money.lua: every script that
// calls it runs it (the source Redis gets is the library, then the script),
// no other script runs it, and no .lua file but the library defines it.
func TestMoneyArithmeticWrittenOnce(t *testing.T) {
	t.Parallel()
	lib := readLua(t, moneyLib)
	require.True(t, strings.HasSuffix(lib, "\n"), "a script's first line must not join the library's last")
	var funcs []string
	for _, m := range regexp.MustCompile(`(?m)^local function (\w+)\(`).FindAllStringSubmatch(lib, -1) {
		funcs = append(funcs, m[1])
	}
	require.Contains(t, funcs, "parse")
	defines := regexp.MustCompile(`\bfunction\s+(` + strings.Join(funcs, "|") + `)\s*\(|\b(` + strings.Join(funcs, "|") + `)\s*=\s*function\b`)
	calls := regexp.MustCompile(`(^|[^.\w])(` + strings.Join(funcs, "|") + `)\(`)

	loaded := map[string]*redis.Script{
		"ban_apply.lua":        banApplyScript,
		"ban_swap.lua":         banSwapScript,
		"cache_fill.lua":       cacheFillScript,
		"code_check.lua":       codeCheckScript,
		"code_issue.lua":       codeIssueScript,
		"deduct.lua":           deductScript,
		"init_balance.lua":     initBalanceScript,
		"reset_balance.lua":    resetBalanceScript,
		"resettle.lua":         resettleScript,
		"settle.lua":           settleScript,
		"score_sync.lua":       scoreSyncScript,
		"score_board_mark.lua": scoreBoardScript,
		"score_claim.lua":      scoreClaimScript,
		"score_release.lua":    scoreReleaseScript,
	}
	var scripts, users []string
	// The directory as it is, not the embedded files: a .lua file the embed
	// pattern misses must not keep a copy either.
	err := filepath.WalkDir("lua", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".lua" {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "lua"+string(filepath.Separator)))
		if strings.HasPrefix(rel, "lib/") {
			return nil
		}
		own := readLua(t, rel)
		require.NotRegexp(t, defines, own, "%s defines a function of %s: call the library's", rel, moneyLib)
		scripts = append(scripts, rel)
		want := own
		if calls.MatchString(own) {
			users = append(users, rel)
			want = lib + own
		}
		s, ok := loaded[rel]
		require.True(t, ok, "%s: add it to this test's list of loaded scripts", rel)
		sum := sha1.Sum([]byte(want))
		require.Equal(t, hex.EncodeToString(sum[:]), s.Hash(), "%s is not loaded as %s", rel, map[bool]string{true: "the library, then the script", false: "the script alone"}[want != own])
		return nil
	})
	require.NoError(t, err)
	require.Len(t, scripts, len(loaded), "every loaded script is a file under lua/")
	slices.Sort(users)
	require.Equal(t, []string{"deduct.lua", "init_balance.lua", "resettle.lua", "settle.lua"}, users)
}

func readLua(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("lua", filepath.FromSlash(name)))
	require.NoError(t, err)
	return string(b)
}
