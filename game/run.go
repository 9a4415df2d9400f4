package game

import (
	"errors"
	"fmt"
	"time"
)

// ErrScoreInvalid is returned (wrapped, with the reason) for a run or a
// score that does not fit its game or session; a session of a game Isle
// does not know is one too.
var ErrScoreInvalid = errors.New("game: implausible score")

// SessionTTL is how long a session lives: a run is submitted within it.
// store keeps a session in Redis for as long (keys.GameSessionTTL; a test
// in store ties the two).
const SessionTTL = 6 * time.Hour

// SessionSlack is how far a run's duration may exceed the time since its
// session started: the client's clock and the request's travel.
const SessionSlack = 5 * time.Second

// LongestRun is the longest run a session allows: its life and the slack.
const LongestRun = SessionTTL + SessionSlack

// A Session is one game played by a user: the seed the client plays with
// and when it started. A run is submitted against it.
type Session struct {
	ID        string
	GameID    string
	UserID    int64
	Seed      int64
	StartedAt time.Time
	ExpiresAt time.Time
}

// NewSession is the session id of the game gameID that user started at
// startedAt with seed; it expires SessionTTL later. A game Isle does not
// know is ErrScoreInvalid.
func NewSession(id, gameID string, userID, seed int64, startedAt time.Time) (Session, error) {
	if _, ok := Lookup(gameID); !ok {
		return Session{}, fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, gameID)
	}
	return Session{ID: id, GameID: gameID, UserID: userID, Seed: seed, StartedAt: startedAt, ExpiresAt: startedAt.Add(SessionTTL)}, nil
}

// CheckRun says whether a run of score points, durationMs and moves fits
// the session's game and the session at now: nothing negative, no longer
// than the session has lasted (and the slack), no faster than the game's
// pace and no more points than its moves can make. The error wraps
// ErrScoreInvalid.
func (s Session) CheckRun(score, durationMs int64, moves int32, now time.Time) error {
	g, ok := Lookup(s.GameID)
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, s.GameID)
	case score < 0 || durationMs < 0 || moves < 0:
		return fmt.Errorf("%w: score, duration and moves must not be negative", ErrScoreInvalid)
	case durationMs > (now.Sub(s.StartedAt) + SessionSlack).Milliseconds(): // in ms: a Duration of durationMs could wrap
		return fmt.Errorf("%w: a run of %d ms in a session started %s ago", ErrScoreInvalid, durationMs, now.Sub(s.StartedAt).Round(time.Second))
	case durationMs < (int64(moves)*1000+g.MovesPerSecond-1)/g.MovesPerSecond:
		return fmt.Errorf("%w: %d moves in %d ms, more than %d a second", ErrScoreInvalid, moves, durationMs, g.MovesPerSecond)
	case score > int64(moves)*g.PointsPerMove:
		return fmt.Errorf("%w: %d points in %d moves, more than %d a move", ErrScoreInvalid, score, moves, g.PointsPerMove)
	}
	return nil
}

// CheckScore says whether score can be a run's of the game gameID, with
// nothing known of the run but its score (a ScoreUpsertMessage from
// another producer): a game Isle knows, 0 or more, and no more than any
// run of the game can make in a session (Game.MaxScore). The error wraps
// ErrScoreInvalid.
func CheckScore(gameID string, score int64) error {
	g, ok := Lookup(gameID)
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown game %q", ErrScoreInvalid, gameID)
	case score < 0:
		return fmt.Errorf("%w: a score must not be negative", ErrScoreInvalid)
	case score > g.MaxScore():
		return fmt.Errorf("%w: %d points, more than a run of %s can make in a session (%d)", ErrScoreInvalid, score, g.ID, g.MaxScore())
	}
	return nil
}
