package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The statuses of an identity_verification row.
const (
	IdentityInit   = "INIT"
	IdentityPassed = "PASSED"
	IdentityFailed = "FAILED"
)

// ErrOtherUser is returned when a certification id is already another
// user's.
var ErrOtherUser = errors.New("store: the certification belongs to another user")

// Identities are the identity verifications: their rows in MySQL and the
// cached "is this user verified" of doc/keys.md (identity:verified).
type Identities struct {
	db *gorm.DB
	r  *Redis
}

// NewIdentities returns the identity verifications of db, cached in r.
func NewIdentities(db *gorm.DB, r *Redis) *Identities { return &Identities{db: db, r: r} }

// VerificationResult is what the identity provider answered for one
// certification.
type VerificationResult struct {
	Username     string
	CertifyID    string
	Passed       bool
	MaterialInfo string // the provider's encrypted material; required when Passed
	TraceID      string
}

// Recorded says what Record did.
type Recorded struct {
	Row      IdentityVerification // as it is now
	Enqueued Enqueued             // the material message, when the row is PASSED
}

// Record records a certification's result. A pass sets the row PASSED
// (passed_at once) and, in the same transaction, writes the material's
// IdentityMaterialMessage into the outbox for domain d: the message leaves
// with the pass or not at all, and recording the same pass again adds no
// second message. A pass is final: a failure recorded after it changes
// nothing. After a pass the user's cached status says verified.
func (ids *Identities) Record(ctx context.Context, d topology.Domain, res VerificationResult) (Recorded, error) {
	msg := topology.IdentityMaterial{Username: res.Username, CertifyID: res.CertifyID, MaterialInfo: res.MaterialInfo}
	if res.Passed {
		if err := msg.Validate(); err != nil {
			return Recorded{}, err
		}
	}
	var out Recorded
	err := sqltx.Transact(ctx, ids.db, func(tx *gorm.DB) error {
		fresh := IdentityVerification{Username: res.Username, CertifyID: res.CertifyID, Status: IdentityInit}
		if err := tx.Omit("id", "created_at", "updated_at").Clauses(clause.OnConflict{DoNothing: true}).Create(&fresh).Error; err != nil {
			return err
		}
		var row IdentityVerification
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("certify_id = ?", res.CertifyID).Take(&row).Error; err != nil {
			return err
		}
		if row.Username != res.Username {
			return fmt.Errorf("%w (%s)", ErrOtherUser, res.CertifyID)
		}
		was := row.Status
		switch {
		case row.Status == IdentityPassed:
		case res.Passed:
			now := time.Now().UTC()
			row.Status, row.PassedAt = IdentityPassed, &now
		default:
			row.Status = IdentityFailed
		}
		// Only a change of status writes: a result recorded again (the
		// provider resends) leaves the row, updated_at included, as it was.
		if row.Status != was {
			if err := tx.Model(&row).Select("status", "passed_at").Updates(&row).Error; err != nil {
				return err
			}
		}
		out.Row = row
		if row.Status != IdentityPassed || !res.Passed {
			return nil
		}
		var err error
		out.Enqueued, err = EnqueueMessage(tx, d, msg, "identity-material:"+res.CertifyID, res.TraceID, 0)
		return err
	})
	if err != nil {
		return Recorded{}, fmt.Errorf("store: record certification %s of %s: %w", res.CertifyID, res.Username, err)
	}
	if out.Row.Status == IdentityPassed {
		// Plain SET: it overrides a "0" that Verified cached from a read
		// made before this commit.
		c := ids.r.Client(keys.IdentityVerified.DB)
		if err := c.Set(ctx, ids.r.Keys().Key(keys.IdentityVerified, res.Username), "1", keys.IdentityStatusTTL).Err(); err != nil {
			return out, fmt.Errorf("store: certification %s recorded; caching the verified status failed: %w", res.CertifyID, err)
		}
	}
	return out, nil
}

// Verified reports whether the user has a passed certification: from the
// cache (an hour) or MySQL, caching the answer. A "not verified" is cached
// only where nothing is, so it never hides a pass recorded meanwhile.
func (ids *Identities) Verified(ctx context.Context, username string) (bool, error) {
	c := ids.r.Client(keys.IdentityVerified.DB)
	key := ids.r.Keys().Key(keys.IdentityVerified, username)
	if v, err := c.Get(ctx, key).Result(); err == nil && (v == "1" || v == "0") {
		return v == "1", nil
	}
	var n int64
	if err := ids.db.WithContext(ctx).Model(&IdentityVerification{}).
		Where("username = ? AND status = ?", username, IdentityPassed).Limit(1).Count(&n).Error; err != nil {
		return false, fmt.Errorf("store: identity of %s: %w", username, err)
	}
	if n > 0 {
		_ = c.Set(ctx, key, "1", keys.IdentityStatusTTL).Err()
		return true, nil
	}
	_ = c.SetNX(ctx, key, "0", keys.IdentityStatusTTL).Err()
	return false, nil
}

// Get returns the certification certifyID, or ErrNotFound.
func (ids *Identities) Get(ctx context.Context, certifyID string) (IdentityVerification, error) {
	var row IdentityVerification
	err := ids.db.WithContext(ctx).Where("certify_id = ?", certifyID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, fmt.Errorf("store: certification %s: %w", certifyID, ErrNotFound)
	}
	if err != nil {
		return row, fmt.Errorf("store: certification %s: %w", certifyID, err)
	}
	return row, nil
}

// SetMaterialURL records where a certification's material was stored. The
// same URL again writes nothing (a redelivery leaves the row as it was).
func (ids *Identities) SetMaterialURL(ctx context.Context, certifyID, url string) error {
	res := ids.db.WithContext(ctx).Model(&IdentityVerification{}).
		Where("certify_id = ? AND (material_info_url IS NULL OR material_info_url <> ?)", certifyID, url).
		Update("material_info_url", url)
	if res.Error != nil {
		return fmt.Errorf("store: material of certification %s: %w", certifyID, res.Error)
	}
	if res.RowsAffected == 0 {
		var n int64
		if err := ids.db.WithContext(ctx).Model(&IdentityVerification{}).Where("certify_id = ?", certifyID).Count(&n).Error; err != nil {
			return fmt.Errorf("store: material of certification %s: %w", certifyID, err)
		}
		if n == 0 {
			return fmt.Errorf("store: material of certification %s: %w", certifyID, gorm.ErrRecordNotFound)
		}
	}
	return nil
}

// CountWithMaterial counts the certifications of certifyIDs whose material
// has been stored.
func (ids *Identities) CountWithMaterial(ctx context.Context, certifyIDs []string) (int64, error) {
	var n int64
	err := ids.db.WithContext(ctx).Model(&IdentityVerification{}).
		Where("certify_id IN ? AND material_info_url IS NOT NULL", certifyIDs).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("store: material of %d certifications: %w", len(certifyIDs), err)
	}
	return n, nil
}
