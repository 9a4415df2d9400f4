package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

var (
	// submitIDField fits mini_game_score.submit_id (game.SubmitIDMax):
	// printable ASCII without spaces.
	submitIDField  = regexp.MustCompile(`^[!-~]{1,` + strconv.Itoa(game.SubmitIDMax) + `}$`)
	sessionIDField = regexp.MustCompile(`^[A-Za-z0-9-]{1,` + strconv.Itoa(game.SessionIDMax) + `}$`)
)

// clientVersionMax is mini_game_score.client_version's width.
const clientVersionMax = game.ClientVersionMax

// scoreRequest is a submission as sent. The numbers are kept raw and parsed
// as integers: decoded into float64 (or json.Number, which takes a quoted
// number too) 1.5, "7" and 2^63 would slip through or round.
type scoreRequest struct {
	SubmitID      string          `json:"submitId"`
	SessionID     string          `json:"sessionId"`
	Score         json.RawMessage `json:"score"`
	DurationMs    json.RawMessage `json:"durationMs"`
	Moves         json.RawMessage `json:"moves"`
	ClientVersion string          `json:"clientVersion"`
}

// scoreRun is a submission that passed validation.
type scoreRun struct {
	SubmitID      string
	SessionID     string
	Score         int64
	DurationMs    int64
	Moves         int32
	ClientVersion string
}

// jsonInt parses a raw JSON value as an integer in 0..max: a JSON number
// written without fraction or exponent, not a string, not null.
func jsonInt(field string, raw json.RawMessage, maxValue int64) (int64, error) {
	want := "want an integer 0.." + strconv.FormatInt(maxValue, 10)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0, badGameRequest(reasonInvalidField, field, field+": required, "+want)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 || n > maxValue {
		return 0, badGameRequest(reasonInvalidField, field, field+": "+want+", got "+clip(string(raw), 32))
	}
	return n, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// validate checks a submission's fields, in field order, without I/O.
func (q scoreRequest) validate() (scoreRun, error) {
	run := scoreRun{SubmitID: q.SubmitID, SessionID: q.SessionID, ClientVersion: q.ClientVersion}
	if !submitIDField.MatchString(q.SubmitID) {
		return run, badGameRequest(reasonInvalidField, "submitId", "submitId: 1-"+strconv.Itoa(game.SubmitIDMax)+" printable ASCII characters, no spaces")
	}
	if !sessionIDField.MatchString(q.SessionID) {
		return run, badGameRequest(reasonBadSession, "sessionId", "sessionId: the id POST /v1/games/{gameId}/sessions answered")
	}
	var err error
	if run.Score, err = jsonInt("score", q.Score, 1<<63-1); err != nil {
		return run, err
	}
	if run.DurationMs, err = jsonInt("durationMs", q.DurationMs, 1<<63-1); err != nil {
		return run, err
	}
	moves, err := jsonInt("moves", q.Moves, 1<<31-1)
	if err != nil {
		return run, err
	}
	run.Moves = int32(moves)
	if !utf8.ValidString(q.ClientVersion) || utf8.RuneCountInString(q.ClientVersion) > clientVersionMax ||
		strings.IndexFunc(q.ClientVersion, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return run, badGameRequest(reasonInvalidField, "clientVersion", "clientVersion: at most "+strconv.Itoa(clientVersionMax)+" printable characters")
	}
	return run, nil
}

// scoreAcceptance is what a 202 answers, and what mg:score:claim keeps
// for the user's submit id: a later submission of the id is told of it.
// score_claim.lua reads UserID and SubmitID of the ones an earlier API
// kept in mg:score:idempotency (doc/games.md): keep their JSON names.
type scoreAcceptance struct {
	SubmitID      string `json:"submitId"`
	GameID        string `json:"gameId"`
	SessionID     string `json:"sessionId"`
	UserID        int64  `json:"userId"`
	Score         int64  `json:"score"`
	DurationMs    int64  `json:"durationMs"`
	Moves         int32  `json:"moves"`
	ClientVersion string `json:"clientVersion"`
	AchievedAt    int64  `json:"achievedAt"` // epoch ms: when the API accepted the run
	Accepted      bool   `json:"accepted"`
}

// submitScore takes a finished run (doc/games.md). In order: the game and the
// fields (400, without I/O), the caller's account (404), the limit of
// GAME_SCORE_SUBMIT_PER_MINUTE per user and game (429), the session and
// the run's plausibility (400), then the claim of the caller's submit id
// and the session together (409 for a submit id the caller used before,
// with the first acceptance; 409 session_used for a session an accepted
// run used up, with that run), then the ScoreUpsertMessage,
// answered 202 once the broker confirmed it. A publish that fails releases
// both claims, so the client's retry is accepted (503) and the session is
// used by an accepted run only.
func (s *Server) submitScore(w http.ResponseWriter, r *http.Request) error {
	gameID, err := routeGame(r)
	if err != nil {
		return err
	}
	var req scoreRequest
	if err := DecodeJSON(r, &req); err != nil {
		return err
	}
	run, err := req.validate()
	if err != nil {
		return err
	}
	p, _ := PrincipalFrom(r.Context())
	userID, err := s.accountID(r.Context(), p.Subject)
	if err != nil {
		return err
	}
	if err := s.limit(r, Limit{Name: "score-submit", Kind: FixedWindow, Family: keys.ScoreSubmitRate,
		Max: s.cfg.ScoreSubmitPerMinute, Per: keys.ScoreRateWindow, Key: perPlayer(gameID, userID)}); err != nil {
		return err
	}
	scores := store.NewScores(s.backends.DB, s.backends.Redis)
	sess, err := scores.Session(r.Context(), gameID, userID, run.SessionID)
	switch {
	case isNotFound(err):
		return badGameRequest(reasonBadSession, "sessionId", "no session "+run.SessionID+" of yours in "+gameID+", or it expired")
	case err != nil:
		return Unavailable("game sessions", err)
	}
	now := s.now()
	if err := sess.CheckRun(run.Score, run.DurationMs, run.Moves, now); err != nil {
		return badGameRequest(reasonImplausibleRun, "", strings.TrimPrefix(err.Error(), game.ErrScoreInvalid.Error()+": "))
	}
	acc := scoreAcceptance{SubmitID: run.SubmitID, GameID: gameID, SessionID: run.SessionID, UserID: userID, Score: run.Score,
		DurationMs: run.DurationMs, Moves: run.Moves, ClientVersion: run.ClientVersion, AchievedAt: now.UnixMilli(), Accepted: true}
	body, err := json.Marshal(acc)
	if err != nil {
		return err
	}
	first, claim, err := scores.ClaimRun(r.Context(), sess, run.SubmitID, body)
	switch {
	case err != nil:
		return Unavailable("score submissions", err)
	case claim == store.SubmitIDUsed:
		return submittedBefore(run.SubmitID, userID, first)
	case claim == store.SessionUsed:
		return sessionUsed(run.SessionID, first)
	case claim == store.SessionGone:
		return badGameRequest(reasonBadSession, "sessionId", "session "+run.SessionID+" expired")
	}
	msg := topology.ScoreUpsert{SubmitID: run.SubmitID, UserID: &userID, GameID: gameID, Score: run.Score, DurationMs: run.DurationMs,
		Moves: run.Moves, AchievedAt: acc.AchievedAt, ClientVersion: run.ClientVersion, TraceID: correlation.RequestID(r.Context())}
	if err := s.Publish(r, msg, messaging.Options{MessageID: scoreMessageID(userID, run.SubmitID)}); err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Second)
		defer cancel()
		if rerr := scores.ReleaseRun(ctx, sess, run.SubmitID, body); rerr != nil {
			// The id and the session stay claimed (24 hours, the session's
			// life): retries are 409s for a score that was never sent.
			// Worth a look.
			s.backends.Log.ErrorContext(r.Context(), "an unpublished score's submit id and session could not be released",
				"submitId", run.SubmitID, "sessionId", run.SessionID, "err", rerr)
		}
		return err
	}
	return JSON(w, http.StatusAccepted, acc)
}

// scoreMessageID is the message id of a run's ScoreUpsertMessage: one per
// run, as a submit id is one per user.
func scoreMessageID(userID int64, submitID string) string {
	return "score:" + strconv.FormatInt(userID, 10) + ":" + submitID
}

// sessionUsed is the 409 of a run submitted on a session another run used
// up; it carries that run's acceptance (error.accepted), which is the
// caller's own: sessions are per user.
func sessionUsed(sessionID string, first []byte) error {
	e := &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "session " + sessionID + " was used by an accepted score; start a new session for a new run",
		Details: map[string]any{"reason": reasonSessionUsed, "sessionId": sessionID}}
	var prev scoreAcceptance
	if json.Unmarshal(first, &prev) == nil && prev.SessionID == sessionID {
		e.Details["accepted"] = prev
	}
	return e
}

// submittedBefore is the 409 of a submit id the caller used before. It
// carries the first acceptance; a record that is not the caller's
// acceptance of this id (one this API did not write) is not shown.
func submittedBefore(submitID string, userID int64, first []byte) error {
	e := &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "submit id " + submitID + " was used before; send a new id for a new run",
		Details: map[string]any{"submitId": submitID}}
	var prev scoreAcceptance
	if json.Unmarshal(first, &prev) == nil && prev.UserID == userID && prev.SubmitID == submitID {
		e.Details["accepted"] = prev
	}
	return e
}
