package keys_test

import (
	"os"
	"testing"

	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

// doc/keys.md is the registry as it is: regenerate it with the registry.
func TestKeysPageIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../doc/keys.md")
	require.NoError(t, err)
	require.Equal(t, string(keys.Markdown()), string(got), "doc/keys.md is stale: run go generate ./store/keys")
}

// The TTL column prints durations as people write them: 30m, not "3".
func TestKeysPagePrintsTTLsWhole(t *testing.T) {
	t.Parallel()
	page := string(keys.Markdown())
	require.Contains(t, page, "| `agent:pricing:{modelName}` | 13 (`REDIS_AGENT_PRICING_DATABASE`) | 30m |")
	require.Contains(t, page, "| `mg:score:lock:{gameId}:{userId}` | 14 (`REDIS_MINI_GAME_DATABASE`) | 10s |")
	require.Contains(t, page, "| 168h |")
}
