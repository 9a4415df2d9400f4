package store_test

import (
	"testing"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

// A session's key lives as long as the game's rules let the session run:
// game imports nothing of Isle, so the key registry keeps its own TTL.
func TestSessionKeyLivesAsLongAsTheSession(t *testing.T) {
	t.Parallel()
	require.Equal(t, game.SessionTTL, keys.GameSessionTTL)
	require.Equal(t, game.SessionTTL, keys.GameSession.TTL)
	require.Equal(t, game.SessionTTL, keys.GameSessionUsed.TTL)
}
