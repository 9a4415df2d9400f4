// Package game holds the mini game's rules (doc/games.md): the games Isle
// keeps scores for and the bounds of a plausible run of each (catalog.go),
// a session and the check of a run against it (run.go), the leaderboard's
// order (board.go) and the widths of the fields a client sends
// (widths.go).
//
// The rules are plain Go: no SQL, no Redis, no clock of their own (the
// caller passes now). store persists what they decide (sessions, the best
// runs, the leaderboards), internal/service/httpapi checks a submission with them
// and handlers refuse for good what they refuse. game imports nothing of
// Isle (e2e/imports_test.go), and its tests need no service.
package game
