package topology

// ScoreUpsert is ScoreUpsertMessage (domain "mini-game-score"): a score to
// keep if it beats the user's best. SubmitID is the client's idempotency key.
type ScoreUpsert struct {
	SubmitID      string `json:"submitId"`
	UserID        *int64 `json:"userId"` // Java Long: may be null
	GameID        string `json:"gameId"` // 2048, tetris, snake
	Score         int64  `json:"score"`
	DurationMs    int64  `json:"durationMs"`
	Moves         int32  `json:"moves"`
	AchievedAt    int64  `json:"achievedAt"` // epoch milliseconds
	ClientVersion string `json:"clientVersion"`
	TraceID       string `json:"traceId"`
	LastError     string `json:"lastError"`
}

// Record is the Java record name.
func (ScoreUpsert) Record() string { return "ScoreUpsertMessage" }

// Domain is the domain ScoreUpsert travels on.
func (ScoreUpsert) Domain() string { return DomainMiniGameScore }

// Validate requires the submit id, a user id > 0, the game, and score,
// duration and moves >= 0, and the strings to fit mini_game_score's
// columns.
func (m ScoreUpsert) Validate() error {
	return firstError(
		required("submitId", m.SubmitID),
		maxChars("submitId", m.SubmitID, 64),
		positivePtr("userId", m.UserID),
		required("gameId", m.GameID),
		maxChars("gameId", m.GameID, 32),
		nonNegative("score", m.Score),
		nonNegative("durationMs", m.DurationMs),
		nonNegative("moves", int64(m.Moves)),
		maxChars("clientVersion", m.ClientVersion, 64),
	)
}
