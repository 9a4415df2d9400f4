package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
)

// The score phase: mini game submissions through the API, end to end to
// each user's best in MySQL and on the leaderboard.
const (
	// scoreGame is the game the bench plays: tetris, whose bounds let a
	// 4-second run of 10 to 39 pieces score the bench's largest numbers
	// (doc/games.md).
	scoreGame = "tetris"
	// scoreSubmitLimit is the own fleet's submit limit per user and game
	// per minute (GAME_SCORE_SUBMIT_PER_MINUTE): the Spring backend's 10 would make
	// the phase measure 429s.
	scoreSubmitLimit = 1_000_000
	// scoreWait bounds the wait for the worker to apply every submission.
	scoreWait = 2 * time.Minute
)

// Scores is the score phase's report.
type Scores struct {
	Skipped    string  `json:"skipped,omitempty"`
	InFlight   int     `json:"inflight"`
	Requests   int64   `json:"requests"` // answered 202
	Errors     int64   `json:"errors"`
	FirstErr   string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"` // first submission to every best in MySQL and the leaderboard
	PerSecond  float64 `json:"per_second"`
	RatioToRaw float64 `json:"ratio_to_raw_end_to_end"`
	// RatioToLimit is PerSecond ÷ the composite limit of a charge, the
	// yardstick of every end-to-end figure.
	RatioToLimit float64 `json:"ratio_to_composite_limit"`
	P50ms        float64 `json:"p50_ms"` // the API's answer
	P99ms        float64 `json:"p99_ms"`
	// Checked says every user's best in MySQL, on the leaderboard and in
	// the meta hash is the highest score the bench submitted for them.
	Checked bool `json:"checked"`
}

// scores submits cfg.Requests scores over the users, 32 at a time, each
// higher than the one before, and times them from the first submission
// until each user's best in MySQL and on the board is their last one.
func (r *run) scores(ctx context.Context) error {
	rep := &r.report.Scores
	if r.fleet == nil {
		rep.Skipped = "needs the bench's own fleet: a running one limits submissions to 10 per user per minute"
		r.logf("scores: skipped (%s)", rep.Skipped)
		return nil
	}
	users := r.users
	ids, err := r.accountIDs(ctx, users)
	if err != nil {
		return err
	}
	tokens := make([]http.Header, len(users))
	for i, u := range users {
		tok, err := httpapi.MintToken(r.cfg.JWTSecret, u, httpapi.RoleUser, time.Hour, time.Now())
		if err != nil {
			return err
		}
		tokens[i] = http.Header{"Authorization": {"Bearer " + tok}, "Content-Type": {"application/json"}}
	}
	n := int64(len(users))
	count := max(int64(r.cfg.Requests/4), 2*n) // past the warm-up scores
	// A session takes one score: each submission gets its own, started
	// before the timing.
	warmSessions, err := r.scoreSessions(ctx, tokens, n)
	if err != nil {
		return err
	}
	sessions, err := r.scoreSessions(ctx, tokens, count)
	if err != nil {
		return err
	}
	url := r.url + "/v1/games/" + scoreGame + "/scores"
	submit := func(phase string, sessions []string) func(i int64) request {
		return func(i int64) request {
			u := int(i) % len(users)
			moves := 10 + i%30 // in 4 s: within tetris's 10 pieces a second, and worth up to 27,830 points each
			body := fmt.Appendf(nil, `{"submitId":"%s-%s-%d","sessionId":"%s","score":%d,"durationMs":%d,"moves":%d,"clientVersion":"isle-bench"}`,
				r.id, phase, i, sessions[i-1], i, 4000, moves)
			return request{url: url, header: tokens[u], body: body}
		}
	}
	// A first score each, then a read: the board exists, so the worker
	// writes to it rather than leaving it to the next read's rebuild.
	if l := closedLoop(ctx, 32, n, time.Minute, submit("warm", warmSessions)); l.Errors > 0 {
		return fmt.Errorf("bench: scores: %d of the first submissions failed: %s", l.Errors, l.FirstErr)
	}
	if err := r.waitBest(ctx, ids, func(int) int64 { return 1 }, scoreWait); err != nil {
		return err
	}
	if _, _, err := store.NewScores(r.db, r.rdb).Leaderboard(ctx, scoreGame, 10); err != nil {
		return err
	}

	rep.InFlight = 32
	began := time.Now()
	l := closedLoop(ctx, rep.InFlight, count, 10*time.Minute, submit("s", sessions))
	rep.Requests, rep.Errors, rep.FirstErr, rep.P50ms, rep.P99ms = l.OK, l.Errors, l.FirstErr, l.P50ms, l.P99ms
	// Scores grow with i, and user u submits i ≡ u (mod users): the best
	// of each is the last i it was sent.
	best := func(u int) int64 { return count - (count-int64(u))%n }
	if err := r.waitBest(ctx, ids, best, scoreWait); err != nil {
		return err
	}
	// End to end is MySQL and the board: the consumer syncs Redis right
	// after its upsert, so the last few may still be on their way.
	deadline := time.Now().Add(scoreWait)
	for err := r.checkBest(ctx, ids, best); err != nil; err = r.checkBest(ctx, ids, best) {
		if time.Now().After(deadline) {
			return err
		}
		sleepCtx(ctx, 10*time.Millisecond)
	}
	took := time.Since(began)
	rep.Seconds, rep.PerSecond = took.Seconds(), float64(rep.Requests)/took.Seconds()
	rep.RatioToRaw, rep.RatioToLimit = r.ratios(rep.PerSecond)
	rep.Checked = true
	r.logf("scores end to end, %d in flight: %.0f submissions/s (p99 %.1f ms) to MySQL and the leaderboard", rep.InFlight, rep.PerSecond, rep.P99ms)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// accountIDs returns the users' account ids.
func (r *run) accountIDs(ctx context.Context, users []string) ([]int64, error) {
	accounts, err := store.NewAccounts(r.db).List(ctx, users)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]int64, len(accounts))
	for _, a := range accounts {
		byName[a.Username] = int64(a.ID)
	}
	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = byName[u]
	}
	return ids, nil
}

// scoreSessions starts count sessions through the API, 32 at a time: the
// i-th (from 1) is user i mod len(tokens)'s, at index i−1.
func (r *run) scoreSessions(ctx context.Context, tokens []http.Header, count int64) ([]string, error) {
	c := client(32)
	defer c.CloseIdleConnections()
	sessions := make([]string, count)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1); i <= count && ctx.Err() == nil; i = next.Add(1) {
				id, err := startSession(ctx, c, r.url, tokens[int(i)%len(tokens)])
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				sessions[i-1] = id
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return sessions, ctx.Err()
}

// startSession starts a session of the bench's game with the user's
// headers and returns its id.
func startSession(ctx context.Context, c *http.Client, url string, header http.Header) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/games/"+scoreGame+"/sessions", strings.NewReader("{}"))
	if err != nil {
		return "", err
	}
	req.Header = header
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: start a session: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &s) != nil || s.SessionID == "" {
		return "", fmt.Errorf("bench: start a session: HTTP %d: %s", resp.StatusCode, clip(string(body), 200))
	}
	return s.SessionID, nil
}

// waitBest waits until every user's best in MySQL is at least want(u).
func (r *run) waitBest(ctx context.Context, ids []int64, want func(u int) int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		rows, err := store.NewScores(r.db, r.rdb).Bests(ctx, scoreGame, ids)
		if err != nil {
			return err
		}
		got := make(map[int64]int64, len(rows))
		for _, row := range rows {
			got[int64(row.UserID)] = row.Score
		}
		behind := 0
		for u, id := range ids {
			if got[id] < want(u) {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: scores: %d users' best not applied after %s", behind, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkBest compares each user's best on the board and in the meta hash
// with what MySQL holds and the bench sent.
func (r *run) checkBest(ctx context.Context, ids []int64, want func(u int) int64) error {
	c, k := r.rdb.Client(keys.DBMiniGame), r.rdb.Keys()
	board := k.Key(keys.Leaderboard, scoreGame)
	for u, id := range ids {
		member := strconv.FormatInt(id, 10)
		z, err := c.ZScore(ctx, board, member).Result()
		if err != nil {
			return fmt.Errorf("bench: scores: user %d on the board: %w", id, err)
		}
		meta, err := c.HGet(ctx, k.Key(keys.UserMeta, scoreGame, member), "score").Result()
		if err != nil {
			return fmt.Errorf("bench: scores: user %d's meta: %w", id, err)
		}
		if w := want(u); int64(z) != w || meta != strconv.FormatInt(w, 10) {
			return fmt.Errorf("bench: scores: user %d: board %v, meta %s, want %d", id, z, meta, w)
		}
	}
	return nil
}
