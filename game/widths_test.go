package game_test

import (
	"strings"
	"testing"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// topology bounds a ScoreUpsertMessage's strings with widths of its own
// (widths.go says why); they are these: a message at each width validates,
// one a character longer is refused on that field.
func TestTopologyBoundsAScoreByTheseWidths(t *testing.T) {
	t.Parallel()
	user := int64(1)
	ok := topology.ScoreUpsert{SubmitID: "s", UserID: &user, GameID: "2048"}
	for _, c := range []struct {
		field string
		width int
		set   func(m *topology.ScoreUpsert, v string)
	}{
		{"submitId", game.SubmitIDMax, func(m *topology.ScoreUpsert, v string) { m.SubmitID = v }},
		{"gameId", game.GameIDMax, func(m *topology.ScoreUpsert, v string) { m.GameID = v }},
		{"clientVersion", game.ClientVersionMax, func(m *topology.ScoreUpsert, v string) { m.ClientVersion = v }},
	} {
		m := ok
		c.set(&m, strings.Repeat("版", c.width)) // characters, not bytes
		require.NoError(t, m.Validate(), "%s at %d characters", c.field, c.width)
		c.set(&m, strings.Repeat("v", c.width+1))
		var fe *topology.FieldError
		require.ErrorAs(t, m.Validate(), &fe, "%s at %d characters", c.field, c.width+1)
		require.Equal(t, c.field, fe.Field)
	}
}
