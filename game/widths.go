package game

// The widths of the strings a client sends with a run, in characters
// (utf8mb4 columns count characters, not bytes). The first three are
// mini_game_score's columns (store/migrations/00005_identity_and_game.sql):
// the API refuses a longer field, so a run it accepts always fits.
//
// topology keeps its own copy of those three in ScoreUpsert.Validate
// (topology/messages_game.go): the wire contract is a leaf that imports
// nothing of Isle (e2e/imports_test.go), and it bounds what any producer,
// the Spring backend's included, may send, so it does not take its widths
// from a package of Isle's rules. widths_test.go ties the two: a message
// at each width here validates, one a character longer does not.
const (
	GameIDMax        = 32 // mini_game_score.game_id, VARCHAR(32)
	SubmitIDMax      = 64 // mini_game_score.submit_id, VARCHAR(64)
	ClientVersionMax = 64 // mini_game_score.client_version, VARCHAR(64)
	// SessionIDMax bounds a session id a client sends back: the API makes
	// UUIDs (36 characters), and a longer id names no session.
	SessionIDMax = 64
)
