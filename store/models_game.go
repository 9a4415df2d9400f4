package store

import "time"

// GameScore is a row of mini_game_score: a user's best score in one game.
type GameScore struct {
	ID            uint64    `gorm:"column:id;primaryKey"`
	UserID        uint64    `gorm:"column:user_id"`
	GameID        string    `gorm:"column:game_id"`
	Score         int64     `gorm:"column:score"`
	DurationMs    int64     `gorm:"column:duration_ms"`
	Moves         int32     `gorm:"column:moves"`
	AchievedAt    int64     `gorm:"column:achieved_at"` // epoch milliseconds
	SubmitID      string    `gorm:"column:submit_id"`
	ClientVersion string    `gorm:"column:client_version"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

// TableName is the table gorm maps GameScore to.
func (GameScore) TableName() string { return "mini_game_score" }
