package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store/keys"
)

// A Claim is what ClaimRun found.
type Claim int

// The outcomes of ClaimRun.
const (
	// Claimed: the submit id and the session are the run's now.
	Claimed Claim = iota
	// SubmitIDUsed: the user claimed the submit id before, by the
	// acceptance ClaimRun returns.
	SubmitIDUsed
	// SessionUsed: another run used the session up; ClaimRun returns its
	// acceptance (the session's user's own).
	SessionUsed
	// SessionGone: the session expired before the run could claim it.
	SessionGone
)

// ClaimRun claims a run's submit id for the session's user (mg:score:claim,
// 24 hours) and its session (mg:score:session-used, while the session
// lives) for the acceptance the API answers, both or neither
// (score_claim.lua): a session takes one accepted score, and of runs
// submitted at once on one session one wins. A submit id is its user's:
// another user's claim of it stands in no one's way. It returns what
// stood in the way with the acceptance it holds. A claim an earlier API
// made in the global mg:score:idempotency still holds for its own user
// (by the userId and submitId of its acceptance, as the API writes it)
// until it expires (doc/games.md).
func (s *Scores) ClaimRun(ctx context.Context, sess game.Session, submitID string, acceptance []byte) (first []byte, c Claim, err error) {
	k := s.r.Keys()
	user := strconv.FormatInt(sess.UserID, 10)
	res, err := scoreClaimScript.Run(ctx, s.client(), []string{k.Key(keys.ScoreClaim, user, submitID),
		k.Key(keys.GameSession, sess.GameID, user, sess.ID), k.Key(keys.GameSessionUsed, sess.GameID, user, sess.ID),
		k.Key(keys.ScoreSubmitOnce, submitID)},
		acceptance, int64(keys.ScoreSubmitTTL.Seconds()), keys.GameSessionTTL.Milliseconds(), user, submitID).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("store: claim submit %s on session %s: %w", submitID, sess.ID, err)
	}
	if len(res) == 2 {
		code, ok1 := res[0].(int64)
		held, ok2 := res[1].(string)
		if ok1 && ok2 && code >= int64(Claimed) && code <= int64(SessionGone) {
			return []byte(held), Claim(code), nil
		}
	}
	return nil, 0, fmt.Errorf("store: claim submit %s: score_claim.lua answered %v", submitID, res)
}

// ReleaseRun undoes ClaimRun for a run whose message could not be
// published, so neither its submit id nor its session is used and the
// client's retry is accepted; each key only while it still holds
// acceptance (score_release.lua).
func (s *Scores) ReleaseRun(ctx context.Context, sess game.Session, submitID string, acceptance []byte) error {
	k := s.r.Keys()
	user := strconv.FormatInt(sess.UserID, 10)
	err := scoreReleaseScript.Run(ctx, s.client(), []string{k.Key(keys.ScoreClaim, user, submitID),
		k.Key(keys.GameSessionUsed, sess.GameID, user, sess.ID)}, acceptance).Err()
	if err != nil {
		return fmt.Errorf("store: release submit %s: %w", submitID, err)
	}
	return nil
}
