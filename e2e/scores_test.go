package e2e_test

import (
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// A ScoreUpsertMessage as the Spring backend publishes it (Jackson's
// converter: __TypeId__, no message id, a null, a field Isle does not
// know), put on the queue beside one written the way Isle encodes it, is
// applied by the real worker like Isle's own: best row, meta hash, high
// score, and the board that a read builds from MySQL.
func TestSpringScoreMessageIsAppliedLikeIslesOwn(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, nil)
	start(t, f.env, "worker").waitFor(t, 30*time.Second, "worker started")
	dom, _ := f.tp.Domain(topology.DomainMiniGameScore)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()

	spring := `{"submitId":"spring-1","userId":41,"gameId":"2048","score":90210,"durationMs":184000,"moves":812,` +
		`"achievedAt":1764417662123,"clientVersion":"3.2.0","traceId":"t-spring","lastError":null,"platform":"android"}`
	own := int64(42)
	body, err := topology.Encode(topology.ScoreUpsert{SubmitID: "isle-1", UserID: &own, GameID: "2048", Score: 90210,
		DurationMs: 184000, Moves: 812, AchievedAt: 1764417662123, ClientVersion: "3.2.0", TraceID: "t-isle"})
	require.NoError(t, err)
	for _, b := range [][]byte{[]byte(spring), body} {
		require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
			ContentType: "application/json", ContentEncoding: "UTF-8", DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"__TypeId__": "com.eisland.server.minigame.mq.ScoreUpsertMessage"}, Body: b,
		}))
	}

	scores := store.NewScores(f.db, f.rdb)
	var rows [2]store.GameScore
	require.Eventually(t, func() bool {
		var err error
		rows[0], err = scores.Best(t.Context(), "2048", 41)
		if err != nil {
			return false
		}
		rows[1], err = scores.Best(t.Context(), "2048", 42)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "not applied")
	for i, r := range rows {
		require.EqualValues(t, 90210, r.Score, i)
		require.EqualValues(t, 184000, r.DurationMs)
		require.EqualValues(t, 812, r.Moves)
		require.EqualValues(t, 1764417662123, r.AchievedAt)
		require.Equal(t, "3.2.0", r.ClientVersion)
	}
	c, k := f.rdb.Client(keys.DBMiniGame), f.rdb.Keys()
	for _, u := range []string{"41", "42"} {
		require.Equal(t, map[string]string{"score": "90210", "durationMs": "184000", "moves": "812", "achievedAt": "1764417662123"},
			c.HGetAll(t.Context(), k.Key(keys.UserMeta, "2048", u)).Val(), u)
		require.Equal(t, "90210", c.Get(t.Context(), k.Key(keys.HighScore, "2048", u)).Val())
	}
	top, rebuilt, err := scores.Leaderboard(t.Context(), "2048", 10)
	require.NoError(t, err)
	require.True(t, rebuilt, "the first read builds the board from MySQL")
	require.Len(t, top, 2)
	require.Zero(t, f.depth(t, topology.DomainMiniGameScore))
	var dead int64
	require.NoError(t, f.db.Table(dom.DLQTable).Count(&dead).Error)
	require.Zero(t, dead)
}
