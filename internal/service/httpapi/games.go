package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/go-chi/chi/v5"
)

// The mini game's endpoints (doc/games.md; keys in doc/keys.md, database 14): sessions, score
// submissions (scores.go) and leaderboards. Each is for a user with an
// account: the keys name the account id, not the username.

// ScoreSubmitPerMinuteDefault is the submission limit per user and
// game (mg:score:submit:rate).
const ScoreSubmitPerMinuteDefault = 10

// leaderboardRefreshFree is how many leaderboard reads a user makes of a
// game in a minute before the answer asks for a CAPTCHA (doc/games.md:
// mg:score:leaderboard:refresh:rate, 5/min).
const leaderboardRefreshFree = 5

// Leaderboard sizes a request may ask for.
const (
	leaderboardLimitDefault = 10
	leaderboardLimitMax     = keys.LeaderboardSize
)

// gameMaxBody bounds the game endpoints' bodies: a score is one small record.
const gameMaxBody = 4 << 10

// The reasons a game endpoint's error gives in its "reason" field; the code
// stays the status's own (bad_request, not_found), as everywhere in the API.
const (
	reasonUnknownGame    = "unknown_game"
	reasonInvalidField   = "invalid_field" // with "field", the first one refused
	reasonBadSession     = "bad_session"
	reasonImplausibleRun = "implausible_run"
	reasonNoAccount      = "no_account"
	reasonSessionUsed    = "session_used" // a 409: the session took a score already
)

// badGameRequest is a 400 with a reason and, when it is about one field,
// the field's name.
func badGameRequest(reason, field, message string) *Error {
	e := &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: message, Details: map[string]any{"reason": reason}}
	if field != "" {
		e.Details["field"] = field
	}
	return e
}

// routeGame returns the route's game, or a 400 naming the games there are.
func routeGame(r *http.Request) (string, error) {
	id := chi.URLParam(r, "gameId")
	if _, ok := game.Lookup(id); !ok {
		return "", badGameRequest(reasonUnknownGame, "", "no game "+strconv.Quote(id)+"; the games are "+strings.Join(game.IDs(), ", "))
	}
	return id, nil
}

// player returns the route's game and the caller's account id.
func (s *Server) player(r *http.Request) (gameID string, userID int64, err error) {
	if gameID, err = routeGame(r); err != nil {
		return "", 0, err
	}
	p, _ := PrincipalFrom(r.Context())
	userID, err = s.accountID(r.Context(), p.Subject)
	return gameID, userID, err
}

// perPlayer keys a game limit by game and account id.
func perPlayer(gameID string, userID int64) func(*http.Request, Principal) ([]string, bool) {
	return func(*http.Request, Principal) ([]string, bool) {
		return []string{gameID, strconv.FormatInt(userID, 10)}, true
	}
}

type sessionAnswer struct {
	SessionID string    `json:"sessionId"`
	GameID    string    `json:"gameId"`
	Seed      int64     `json:"seed"`
	StartedAt time.Time `json:"startedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// startSession starts a game for the caller: the seed the client plays
// with, kept 6 hours (mg:score:session) for the scores submitted against it.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request) error {
	gameID, userID, err := s.player(r)
	if err != nil {
		return err
	}
	sess, err := store.NewScores(s.backends.DB, s.backends.Redis).StartSession(r.Context(), gameID, userID)
	if err != nil {
		return Unavailable("game sessions", err)
	}
	return JSON(w, http.StatusCreated, sessionAnswer{SessionID: sess.ID, GameID: sess.GameID, Seed: sess.Seed,
		StartedAt: sess.StartedAt.UTC(), ExpiresAt: sess.ExpiresAt.UTC()})
}

type leaderboardAnswer struct {
	GameID          string                   `json:"gameId"`
	Entries         []store.LeaderboardEntry `json:"entries"`
	CaptchaRequired bool                     `json:"captchaRequired"`
}

// leaderboard answers the top of a game (?limit=1..200, default 10) from
// its ZSET, rebuilt from MySQL when it is missing. Past 5 reads a minute
// per user and game the answer still comes, with captchaRequired set.
func (s *Server) leaderboard(w http.ResponseWriter, r *http.Request) error {
	gameID, err := routeGame(r)
	if err != nil {
		return err
	}
	limit := leaderboardLimitDefault
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > leaderboardLimitMax {
			return badGameRequest(reasonInvalidField, "limit", "limit: want an integer 1.."+strconv.Itoa(leaderboardLimitMax))
		}
		limit = n
	}
	p, _ := PrincipalFrom(r.Context())
	userID, err := s.accountID(r.Context(), p.Subject)
	if err != nil {
		return err
	}
	captcha := s.over(r, Limit{Name: "leaderboard-refresh", Kind: FixedWindow, Family: keys.LeaderboardRefresh,
		Max: leaderboardRefreshFree, Per: keys.ScoreRateWindow, Key: perPlayer(gameID, userID)})
	entries, rebuilt, err := store.NewScores(s.backends.DB, s.backends.Redis).Leaderboard(r.Context(), gameID, limit)
	switch {
	case errors.Is(err, game.ErrScoreInvalid): // the game was checked: not the client's fault
		return err
	case err != nil:
		return Unavailable("leaderboard", err)
	}
	if rebuilt {
		s.backends.Log.InfoContext(r.Context(), "leaderboard rebuilt from MySQL", "game", gameID, "entries", len(entries))
	}
	if entries == nil {
		entries = []store.LeaderboardEntry{}
	}
	return JSON(w, http.StatusOK, leaderboardAnswer{GameID: gameID, Entries: entries, CaptchaRequired: captcha})
}
