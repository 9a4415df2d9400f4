package e2e_test

import (
	"fmt"
	"github.com/redis/go-redis/v9"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
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
	c, k := f.rdb.Client(keys.DBMiniGame), f.rdb.Keys()
	var rows [2]store.GameScore
	require.Eventually(t, func() bool {
		var err error
		rows[0], err = scores.Best(t.Context(), "2048", 41)
		if err != nil {
			return false
		}
		if rows[1], err = scores.Best(t.Context(), "2048", 42); err != nil {
			return false
		}
		// The row commits before the worker writes Redis: wait for both
		// runs to be marked applied, which comes after.
		return c.Exists(t.Context(), k.Key(keys.ScoreApplied, "41", "spring-1"), k.Key(keys.ScoreApplied, "42", "isle-1")).Val() == 2
	}, 30*time.Second, 50*time.Millisecond, "not applied")
	for i, r := range rows {
		require.EqualValues(t, 90210, r.Score, i)
		require.EqualValues(t, 184000, r.DurationMs)
		require.EqualValues(t, 812, r.Moves)
		require.EqualValues(t, 1764417662123, r.AchievedAt)
		require.Equal(t, "3.2.0", r.ClientVersion)
	}
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

// Runs with equal scores, Spring's and Isle's, reach the real worker in an
// order unlike the one they were achieved in: each user's row keeps the
// run achieved first, and the board the consumer keeps (and the one
// rebuilt from MySQL) ranks equal scores by who achieved them first, not
// by user id as text.
func TestEqualScoresRankByWhoAchievedThemFirstThroughTheWorker(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, nil)
	start(t, f.env, "worker").waitFor(t, 30*time.Second, "worker started")
	dom, _ := f.tp.Domain(topology.DomainMiniGameScore)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	publish := func(body string) {
		t.Helper()
		require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"__TypeId__": "com.eisland.server.minigame.mq.ScoreUpsertMessage"}, Body: []byte(body)}))
	}
	spring := func(submitID string, user, score, at int64) string { // Jackson's shape: no message id, a null
		return fmt.Sprintf(`{"submitId":%q,"userId":%d,"gameId":"snake","score":%d,"durationMs":60000,"moves":700,`+
			`"achievedAt":%d,"clientVersion":"3.2.0","traceId":"t","lastError":null}`, submitID, user, score, at)
	}
	scores := store.NewScores(f.db, f.rdb)
	best := func(user, at int64) func() bool {
		return func() bool {
			row, err := scores.Best(t.Context(), "snake", user)
			return err == nil && row.AchievedAt == at
		}
	}
	base := time.Now().UnixMilli()
	publish(spring("top", 2, 900, base))
	require.Eventually(t, best(2, base), 30*time.Second, 50*time.Millisecond)
	_, rebuilt, err := scores.Leaderboard(t.Context(), "snake", 10) // the board exists: the consumer writes to it
	require.NoError(t, err)
	require.True(t, rebuilt)

	ten := int64(10)
	own, err := topology.Encode(topology.ScoreUpsert{SubmitID: "isle-10", UserID: &ten, GameID: "snake", Score: 500,
		DurationMs: 60000, Moves: 700, AchievedAt: base, ClientVersion: "1.4.0", TraceID: "t"})
	require.NoError(t, err)
	publish(spring("s9-late", 9, 500, base+2000))
	publish(spring("s100", 100, 500, base+1000))
	publish(string(own))
	publish(spring("s9-early", 9, 500, base-500)) // achieved before all, delivered last
	for user, at := range map[int64]int64{9: base - 500, 10: base, 100: base + 1000} {
		require.Eventually(t, best(user, at), 30*time.Second, 50*time.Millisecond, "user %d", user)
	}
	want := []int64{2, 9, 10, 100}
	read := func() []int64 {
		top, _, err := scores.Leaderboard(t.Context(), "snake", 10)
		require.NoError(t, err)
		var ids []int64
		for _, e := range top {
			ids = append(ids, e.UserID)
		}
		return ids
	}
	c, k := f.rdb.Client(keys.DBMiniGame), f.rdb.Keys()
	require.Eventually(t, func() bool { // the last sync may trail the row
		members := c.ZRangeArgs(t.Context(), redis.ZRangeArgs{Key: k.Key(keys.Leaderboard, "snake"), Start: 0, Stop: -1, Rev: true}).Val()
		return fmt.Sprint(members) == "[2 9 10 100]"
	}, 30*time.Second, 50*time.Millisecond, "the consumer's board")
	require.Equal(t, want, read())
	storetest.Wipe(t, f.rdb)
	require.Equal(t, want, read(), "rebuilt from MySQL")
	var dead int64
	require.NoError(t, f.db.Table(dom.DLQTable).Count(&dead).Error)
	require.Zero(t, dead)
}
