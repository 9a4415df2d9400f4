package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// player makes an account and returns a user token for it and its id.
func (b *testBundle) player(t *testing.T, name string) (string, int64) {
	t.Helper()
	u, err := store.NewAccounts(b.db).Create(t.Context(), name, "", decimal.Zero)
	require.NoError(t, err)
	return b.token(t, name, httpapi.RoleUser), int64(u.ID)
}

// session starts a game and returns the session id.
func (b *testBundle) session(t *testing.T, token, game string) string {
	t.Helper()
	status, _, out := b.do(t, http.MethodPost, "/v1/games/"+game+"/sessions", token, "")
	require.Equal(t, http.StatusCreated, status, "%v", out)
	return out["sessionId"].(string)
}

func scoreBody(submitID, sessionID string, score, durationMs, moves int64) string {
	return fmt.Sprintf(`{"submitId":%q,"sessionId":%q,"score":%d,"durationMs":%d,"moves":%d,"clientVersion":"1.4.0"}`,
		submitID, sessionID, score, durationMs, moves)
}

// scored is how many ScoreUpsertMessages wait on the mini game's queue.
func (b *testBundle) scored(t *testing.T) int {
	t.Helper()
	conn, _ := b.conn(t)
	d, _ := b.tp.Domain(topology.DomainMiniGameScore)
	return storetest.QueueDepth(t, conn, d.Queue)
}

// reason returns the error model's reason.
func reason(t *testing.T, body map[string]any) string {
	t.Helper()
	errorCode(t, body)
	r, _ := body["error"].(map[string]any)["reason"].(string)
	return r
}

func TestGameSessionStarts(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tok, id := b.player(t, "alice")
	before := time.Now().Add(-time.Second)
	status, _, out := b.do(t, http.MethodPost, "/v1/games/2048/sessions", tok, "")
	require.Equal(t, http.StatusCreated, status, "%v", out)
	require.Equal(t, "2048", out["gameId"])
	require.NotEmpty(t, out["sessionId"])
	require.IsType(t, float64(0), out["seed"])
	started, err := time.Parse(time.RFC3339Nano, out["startedAt"].(string))
	require.NoError(t, err)
	expires, err := time.Parse(time.RFC3339Nano, out["expiresAt"].(string))
	require.NoError(t, err)
	require.True(t, started.After(before) && started.Before(time.Now().Add(time.Second)), "%s", started)
	require.Equal(t, keys.GameSessionTTL, expires.Sub(started))

	sess, err := store.NewScores(b.db, b.redis).Session(t.Context(), "2048", id, out["sessionId"].(string))
	require.NoError(t, err, "the Spring backend's session key, under the account id")
	require.True(t, sess.StartedAt.Equal(started))

	status, _, out = b.do(t, http.MethodPost, "/v1/games/chess/sessions", tok, "")
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "unknown_game", reason(t, out))
}

// An accepted score is published once, as the other publishers do it; the
// same submit id again is a 409 carrying the first acceptance, and
// publishes nothing.
func TestScoreAcceptedOnceAndPublished(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	alice, aliceID := b.player(t, "alice")
	sess := b.session(t, alice, "2048")

	status, _, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-1", sess, 2048, 4_000, 150),
		"X-Request-Id", "req-score-1")
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	achieved := out["achievedAt"].(float64)
	require.InDelta(t, float64(time.Now().UnixMilli()), achieved, 5000)
	require.Equal(t, map[string]any{"submitId": "run-1", "gameId": "2048", "sessionId": sess, "userId": float64(aliceID),
		"score": float64(2048), "durationMs": float64(4_000), "moves": float64(150), "clientVersion": "1.4.0",
		"achievedAt": achieved, "accepted": true}, out)

	d, _ := b.tp.Domain(topology.DomainMiniGameScore)
	conn, _ := b.conn(t)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	msg, ok, err := ch.Get(d.Queue, true)
	require.NoError(t, err)
	require.True(t, ok, "the message is on the queue once the 202 is answered")
	require.Equal(t, "application/json", msg.ContentType)
	require.Equal(t, uint8(amqp.Persistent), msg.DeliveryMode)
	require.Equal(t, d.TypeID, msg.Headers["__TypeId__"])
	require.Equal(t, "req-score-1", msg.Headers["x-trace-id"])
	require.Equal(t, "req-score-1", msg.CorrelationId)
	require.Equal(t, fmt.Sprintf("score:%d:run-1", aliceID), msg.MessageId)
	m, err := topology.Decode[topology.ScoreUpsert](msg.Body)
	require.NoError(t, err)
	require.Equal(t, topology.ScoreUpsert{SubmitID: "run-1", UserID: &aliceID, GameID: "2048", Score: 2048, DurationMs: 4_000, Moves: 150,
		AchievedAt: int64(achieved), ClientVersion: "1.4.0", TraceID: "req-score-1"}, m)

	// The same run again: 409 with the first acceptance, nothing published.
	status, _, again := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-1", sess, 4096, 4_500, 160))
	require.Equal(t, http.StatusConflict, status, "%v", again)
	require.Equal(t, "conflict", errorCode(t, again))
	require.Equal(t, out, again["error"].(map[string]any)["accepted"], "the first acceptance, not the second body")

	require.Zero(t, b.scored(t), "no second message")
}

// A submit id is its user's own: another user who sends the same id (by
// chance, or ahead of its owner to have the owner's run refused) has a run
// of their own accepted, and neither run stands in the other's way. Each
// user's id is still accepted once.
func TestSubmitIDsAreTheirUsersOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	alice, aliceID := b.player(t, "alice")
	bob, bobID := b.player(t, "bob")

	// bob claims the id alice's client will send next.
	status, _, bobs := b.do(t, http.MethodPost, "/v1/games/2048/scores", bob, scoreBody("run-1", b.session(t, bob, "2048"), 10, 1000, 5))
	require.Equal(t, http.StatusAccepted, status, "%v", bobs)
	status, _, alices := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-1", b.session(t, alice, "2048"), 2048, 4_000, 150))
	require.Equal(t, http.StatusAccepted, status, "alice's run is hers to submit: %v", alices)
	require.InDelta(t, aliceID, alices["userId"], 0)

	d, _ := b.tp.Domain(topology.DomainMiniGameScore)
	conn, _ := b.conn(t)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	for _, want := range []int64{bobID, aliceID} {
		msg, ok, err := ch.Get(d.Queue, true)
		require.NoError(t, err)
		require.True(t, ok)
		m, err := topology.Decode[topology.ScoreUpsert](msg.Body)
		require.NoError(t, err)
		require.Equal(t, "run-1", m.SubmitID)
		require.Equal(t, want, *m.UserID)
		require.Equal(t, fmt.Sprintf("score:%d:run-1", want), msg.MessageId, "one message id a run")
	}

	// Each id still takes one run of its user, and answers with that one.
	status, _, again := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("run-1", b.session(t, alice, "2048"), 4096, 4_500, 160))
	require.Equal(t, http.StatusConflict, status, "%v", again)
	require.Equal(t, alices, again["error"].(map[string]any)["accepted"])
	status, _, again = b.do(t, http.MethodPost, "/v1/games/2048/scores", bob, scoreBody("run-1", b.session(t, bob, "2048"), 20, 1000, 5))
	require.Equal(t, http.StatusConflict, status, "%v", again)
	require.Equal(t, bobs, again["error"].(map[string]any)["accepted"])
	require.NotContains(t, fmt.Sprint(again), "4000", "nothing of alice's run")
	require.Zero(t, b.scored(t), "no more messages")
}

// Every bad submission is a 400 that says why, and publishes nothing.
func TestScoreRefusalsPublishNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{scoreRate: 1000})
	alice, _ := b.player(t, "alice")
	bob, _ := b.player(t, "bob")
	sess := b.session(t, alice, "2048")
	bobSess := b.session(t, bob, "2048")
	tetris := b.session(t, alice, "tetris")
	body := func(score string) string {
		return `{"submitId":"s1","sessionId":"` + sess + `","score":` + score + `,"durationMs":1000,"moves":10}`
	}
	for _, c := range []struct {
		name, game, body, reason, field string
	}{
		{"negative score", "2048", body("-1"), "invalid_field", "score"},
		{"fractional score", "2048", body("1.5"), "invalid_field", "score"},
		{"integral fraction", "2048", body("100.0"), "invalid_field", "score"},
		{"exponent", "2048", body("1e3"), "invalid_field", "score"},
		{"string score", "2048", body(`"100"`), "invalid_field", "score"},
		{"null score", "2048", body("null"), "invalid_field", "score"},
		{"overflowing score", "2048", body("9223372036854775808"), "invalid_field", "score"},
		{"huge score", "2048", body("1" + strings.Repeat("0", 400)), "invalid_field", "score"},
		{"no score", "2048", `{"submitId":"s1","sessionId":"` + sess + `","durationMs":1000,"moves":10}`, "invalid_field", "score"},
		{"negative duration", "2048", `{"submitId":"s1","sessionId":"` + sess + `","score":1,"durationMs":-5,"moves":10}`, "invalid_field", "durationMs"},
		{"moves past int32", "2048", `{"submitId":"s1","sessionId":"` + sess + `","score":1,"durationMs":1000,"moves":2147483648}`, "invalid_field", "moves"},
		{"no submit id", "2048", `{"sessionId":"` + sess + `","score":1,"durationMs":1000,"moves":10}`, "invalid_field", "submitId"},
		{"submit id with a space", "2048", scoreBody("s 1", sess, 1, 1000, 10), "invalid_field", "submitId"},
		{"submit id too long", "2048", scoreBody(strings.Repeat("x", 65), sess, 1, 1000, 10), "invalid_field", "submitId"},
		{"client version too long", "2048", `{"submitId":"s1","sessionId":"` + sess + `","score":1,"durationMs":1000,"moves":10,"clientVersion":"` +
			strings.Repeat("v", 65) + `"}`, "invalid_field", "clientVersion"},
		{"unknown game", "chess", scoreBody("s1", sess, 1, 1000, 10), "unknown_game", ""},
		{"no session", "2048", `{"submitId":"s1","score":1,"durationMs":1000,"moves":10}`, "bad_session", "sessionId"},
		{"unknown session", "2048", scoreBody("s1", "6f1d7a0e-0000-4000-8000-000000000000", 1, 1000, 10), "bad_session", "sessionId"},
		{"another user's session", "2048", scoreBody("s1", bobSess, 1, 1000, 10), "bad_session", "sessionId"},
		{"another game's session", "2048", scoreBody("s1", tetris, 1, 1000, 10), "bad_session", "sessionId"},
		{"longer than the session", "2048", scoreBody("s1", sess, 100, 3_600_000, 100), "implausible_run", ""},
		{"moves too fast", "2048", scoreBody("s1", sess, 100, 100, 100), "implausible_run", ""},
		{"points without moves", "2048", scoreBody("s1", sess, 100, 1000, 0), "implausible_run", ""},
		{"more points than 2048's merges make", "2048", scoreBody("s1", sess, 601, 1000, 10), "implausible_run", ""},
		{"faster than 2048's 50 moves a second", "2048", scoreBody("s1", sess, 10, 1000, 51), "implausible_run", ""},
		{"faster than tetris's 10 pieces a second", "tetris", scoreBody("s1", tetris, 10, 1000, 11), "implausible_run", ""},
		{"a duration that wrapped a time.Duration", "2048", scoreBody("s1", sess, 0, 9_223_372_036_854_775_807, 0), "implausible_run", ""},
		{"malformed JSON", "2048", `{"submitId":"s1",`, "", ""},
		{"trailing data", "2048", scoreBody("s1", sess, 1, 1000, 10) + `{}`, "", ""},
		{"not an object", "2048", `[1]`, "", ""},
	} {
		status, _, out := b.do(t, http.MethodPost, "/v1/games/"+c.game+"/scores", alice, c.body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", c.name, out)
		require.Equal(t, c.reason, reason(t, out), "%s: %v", c.name, out)
		if c.field != "" {
			require.Equal(t, c.field, out["error"].(map[string]any)["field"], c.name)
		}
	}
	status, _, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice,
		`{"submitId":"s1","sessionId":"`+sess+`","score":1,"durationMs":1000,"moves":10,"pad":"`+strings.Repeat("x", 8<<10)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "%v", out)
	require.Zero(t, b.scored(t), "nothing was published")

	// None of them used the submit id up, nor the session.
	status, _, out = b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("s1", sess, 1, 1000, 10))
	require.Equal(t, http.StatusAccepted, status, "%v", out)
	require.Equal(t, 1, b.scored(t))
}

// The submission limit: 10 a minute per user and game by default, then 429
// with Retry-After; GAME_SCORE_SUBMIT_PER_MINUTE raises it.
func TestScoreSubmitLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	alice, aliceID := b.player(t, "alice")
	for i := range 10 { // a session a run: a session takes one score
		status, _, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("r"+strconv.Itoa(i), b.session(t, alice, "2048"), 10, 1000, 10))
		require.Equal(t, http.StatusAccepted, status, "submission %d: %v", i+1, out)
	}
	status, h, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("r10", b.session(t, alice, "2048"), 10, 1000, 10))
	require.Equal(t, http.StatusTooManyRequests, status, "%v", out)
	require.Equal(t, "rate_limited", errorCode(t, out))
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, secs >= 1 && secs <= 60, "%d", secs)
	require.Equal(t, 10, b.scored(t), "the 11th was not published")
	ttl := b.redis.Client(keys.DBMiniGame).TTL(t.Context(), b.redis.Keys().ScoreSubmitRate("2048", strconv.FormatInt(aliceID, 10))).Val()
	require.True(t, ttl > 0 && ttl <= keys.ScoreRateWindow, "the Spring backend's key, under the account id: %s", ttl)

	// Another game has its own budget.
	status, _, out = b.do(t, http.MethodPost, "/v1/games/snake/scores", alice, scoreBody("r11", b.session(t, alice, "snake"), 10, 1000, 10))
	require.Equal(t, http.StatusAccepted, status, "%v", out)

	raised := setup(t, options{scoreRate: 11})
	alice, _ = raised.player(t, "alice")
	for i := range 11 {
		status, _, out := raised.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("r"+strconv.Itoa(i), raised.session(t, alice, "2048"), 10, 1000, 10))
		require.Equal(t, http.StatusAccepted, status, "submission %d: %v", i+1, out)
	}
	status, _, _ = raised.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("r11", raised.session(t, alice, "2048"), 10, 1000, 10))
	require.Equal(t, http.StatusTooManyRequests, status)
}

// A score the broker does not confirm is a 503 that leaves the submit id
// free: the client's retry is accepted.
func TestScoreUnpublishedIsRetryable(t *testing.T) {
	t.Parallel()
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	b := setup(t, options{amqpURL: strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)})
	alice, aliceID := b.player(t, "alice")
	sess := b.session(t, alice, "2048")

	proxy.Pause()
	status, h, out := b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("r1", sess, 10, 1000, 10))
	require.Equal(t, http.StatusServiceUnavailable, status, "%v", out)
	require.NotEmpty(t, h.Get("Retry-After"))
	n, err := b.redis.Client(keys.DBMiniGame).Exists(t.Context(), b.redis.Keys().Key(keys.ScoreClaim, strconv.FormatInt(aliceID, 10), "r1")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the submit id was released")
	proxy.Resume()

	require.Eventually(t, func() bool {
		status, _, _ = b.do(t, http.MethodPost, "/v1/games/2048/scores", alice, scoreBody("r1", sess, 10, 1000, 10))
		return status == http.StatusAccepted
	}, 10*time.Second, 200*time.Millisecond, "the retry is accepted")
	require.Eventually(t, func() bool { return b.scored(t) >= 1 }, 5*time.Second, 50*time.Millisecond)
}

// The leaderboard is rebuilt from MySQL when its keys are gone, and asks
// for a CAPTCHA after the 5th read in a minute.
func TestLeaderboard(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	alice, aliceID := b.player(t, "alice")
	_, bobID := b.player(t, "bob")
	_, carolID := b.player(t, "carol")
	insert := func(user, score, moves int64) {
		require.NoError(t, b.db.Exec("INSERT INTO mini_game_score (user_id, game_id, score, duration_ms, moves, achieved_at, submit_id, client_version)"+
			" VALUES (?, 'tetris', ?, ?, ?, ?, ?, '1.0')", user, score, moves*100, moves, 1_700_000_000_000+user, fmt.Sprint("seed-", user)).Error)
	}
	insert(aliceID, 300, 30)
	insert(bobID, 900, 90)

	read := func(query string) (int, map[string]any) {
		status, _, out := b.do(t, http.MethodGet, "/v1/games/tetris/leaderboard"+query, alice, "")
		return status, out
	}
	status, out := read("")
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "tetris", out["gameId"])
	require.Equal(t, false, out["captchaRequired"])
	require.Len(t, out["entries"], 2)

	// Redis loses the board and the run details; MySQL gained a row.
	c := b.redis.Client(keys.DBMiniGame)
	k := b.redis.Keys()
	for _, id := range []int64{aliceID, bobID, carolID} {
		require.NoError(t, c.Del(t.Context(), k.Key(keys.UserMeta, "tetris", strconv.FormatInt(id, 10))).Err())
	}
	require.NoError(t, c.Del(t.Context(), k.Key(keys.Leaderboard, "tetris")).Err())
	insert(carolID, 600, 60)
	status, out = read("?limit=200")
	require.Equal(t, http.StatusOK, status, "%v", out)
	var rows []store.GameScore
	require.NoError(t, b.db.Where("game_id = ?", "tetris").Order("score DESC").Find(&rows).Error)
	names := map[int64]string{aliceID: "alice", bobID: "bob", carolID: "carol"}
	var want []any
	for i, r := range rows {
		want = append(want, map[string]any{"rank": float64(i + 1), "userId": float64(r.UserID), "username": names[int64(r.UserID)],
			"score": float64(r.Score), "durationMs": float64(r.DurationMs), "moves": float64(r.Moves), "achievedAt": float64(r.AchievedAt)})
	}
	require.Len(t, want, 3)
	require.Equal(t, want, out["entries"], "rebuilt from MySQL")

	status, out = read("?limit=1")
	require.Equal(t, http.StatusOK, status)
	require.Len(t, out["entries"], 1)
	require.Equal(t, "bob", out["entries"].([]any)[0].(map[string]any)["username"])

	// That was the 3rd read; the 4th and 5th are free, the 6th asks for a CAPTCHA
	// and still answers.
	for i := 4; i <= 5; i++ {
		status, out = read("")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, false, out["captchaRequired"], "read %d", i)
	}
	status, out = read("")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, out["captchaRequired"], "the 6th read in a minute")
	require.Len(t, out["entries"], 3)
	status, out = b.getJSON(t, "/v1/games/2048/leaderboard", alice)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, false, out["captchaRequired"], "another game counts apart")
	require.Equal(t, []any{}, out["entries"], "an empty board is an empty list")

	for _, q := range []string{"?limit=0", "?limit=201", "?limit=-1", "?limit=1.5", "?limit=ten"} {
		status, out = read(q)
		require.Equal(t, http.StatusBadRequest, status, q)
		require.Equal(t, "invalid_field", reason(t, out), q)
	}
	status, out = b.getJSON(t, "/v1/games/chess/leaderboard", alice)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "unknown_game", reason(t, out))
}

func (b *testBundle) getJSON(t *testing.T, path, token string) (int, map[string]any) {
	t.Helper()
	status, _, out := b.do(t, http.MethodGet, path, token, "")
	return status, out
}

// The game endpoints are for users with an account.
func TestGameEndpointsNeedAUserWithAnAccount(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	svc := b.token(t, "gateway", httpapi.RoleService)
	ghost := b.token(t, "ghost", httpapi.RoleUser)
	for _, rt := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/games/2048/sessions", ""},
		{http.MethodPost, "/v1/games/2048/scores", scoreBody("g1", "6f1d7a0e-0000-4000-8000-000000000000", 1, 1000, 10)},
		{http.MethodGet, "/v1/games/2048/leaderboard", ""},
	} {
		status, h, out := b.do(t, rt.method, rt.path, "", rt.body)
		require.Equal(t, http.StatusUnauthorized, status, rt.path)
		require.Equal(t, "unauthorized", errorCode(t, out))
		require.NotEmpty(t, h.Get("WWW-Authenticate"))
		status, _, out = b.do(t, rt.method, rt.path, svc, rt.body)
		require.Equal(t, http.StatusForbidden, status, rt.path)
		require.Equal(t, "forbidden", errorCode(t, out))
		status, _, out = b.do(t, rt.method, rt.path, ghost, rt.body)
		require.Equal(t, http.StatusNotFound, status, rt.path)
		require.Equal(t, "no_account", reason(t, out))
	}
	require.Zero(t, b.scored(t))
}
