package store

import "time"

// IdentityVerification is a row of identity_verification.
type IdentityVerification struct {
	ID              uint64     `gorm:"column:id;primaryKey"`
	Username        string     `gorm:"column:username"`
	CertifyID       string     `gorm:"column:certify_id"`
	Status          string     `gorm:"column:status"`
	MaterialInfoURL *string    `gorm:"column:material_info_url"`
	PassedAt        *time.Time `gorm:"column:passed_at"`
	CreatedAt       time.Time  `gorm:"column:created_at"`
	UpdatedAt       time.Time  `gorm:"column:updated_at"`
}

// TableName is the table gorm maps IdentityVerification to.
func (IdentityVerification) TableName() string { return "identity_verification" }
