package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// ErrUserExists is returned by CreateUser for a taken username.
var ErrUserExists = errors.New("store: user exists")

// OpeningEntryID is the ledger entry id of an account's opening balance.
const OpeningEntryID = "opening"

// Accounts are the user_account rows: a user's durable balance, changed
// only with a ledger entry (Ledger), and profile.
type Accounts struct{ db *gorm.DB }

// NewAccounts returns the accounts of db.
func NewAccounts(db *gorm.DB) *Accounts { return &Accounts{db: db} }

// Create adds a user_account row. A non-zero opening balance is written
// with its RECHARGE ledger entry in the same transaction, so the balance is
// always the sum of the ledger.
func (a *Accounts) Create(ctx context.Context, username, email string, opening decimal.Decimal) (UserAccount, error) {
	db := a.db
	if username == "" || len(username) > 64 {
		return UserAccount{}, fmt.Errorf("store: create user: username must be 1..64 bytes")
	}
	if opening.IsNegative() || opening.Exponent() < -MoneyScale {
		return UserAccount{}, fmt.Errorf("store: create user %s: opening balance %s: want >= 0 with at most 8 decimals", username, opening)
	}
	u := UserAccount{Username: username, BalanceFen: opening}
	if opening.IsPositive() {
		u.LedgerSeq = 1
	}
	if email != "" {
		u.Email = &email
	}
	err := sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		if err := tx.Omit("created_at", "updated_at", "pro_expire_at").Create(&u).Error; err != nil {
			if sqltx.IsDuplicate(err) {
				return fmt.Errorf("%w: %s", ErrUserExists, username)
			}
			return err
		}
		if !opening.IsPositive() {
			return nil
		}
		reason := "opening balance"
		now := time.Now().UTC()
		return tx.Omit("id", "created_at").Create(&LedgerEntry{
			Username: username, Kind: LedgerRecharge, EntryID: OpeningEntryID, Seq: 1, AmountFen: opening,
			Reason: &reason, Source: "islectl", OccurredAt: now, SettledAt: &now, // a new user has no Redis balance yet
		}).Error
	})
	if err != nil {
		return UserAccount{}, fmt.Errorf("store: create user %s: %w", username, err)
	}
	return u, nil
}

// Get returns the account of username, or ErrNotFound.
func (a *Accounts) Get(ctx context.Context, username string) (UserAccount, error) {
	db := a.db
	var u UserAccount
	err := db.WithContext(ctx).Where("username = ?", username).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return u, fmt.Errorf("store: user %s: %w", username, ErrNotFound)
	}
	if err != nil {
		return u, fmt.Errorf("store: user %s: %w", username, err)
	}
	return u, nil
}

// Created returns when the accounts of usernames were created, for the
// names that name one byte for byte, as the ledger matches a debit to its
// account (a name equal to one only under the column's collation, such as
// with trailing spaces, names none).
func (a *Accounts) Created(ctx context.Context, usernames []string) (map[string]time.Time, error) {
	asked := make(map[string]bool, len(usernames))
	for _, u := range usernames {
		asked[u] = true
	}
	out := make(map[string]time.Time, len(usernames))
	for start := 0; start < len(usernames); start += 1000 {
		var rows []UserAccount
		err := a.db.WithContext(ctx).Select("username", "created_at").Where("username IN ?", usernames[start:min(start+1000, len(usernames))]).Find(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("store: accounts of %d users: %w", len(usernames), err)
		}
		for _, r := range rows {
			if asked[r.Username] { // the IN compared by the collation
				out[r.Username] = r.CreatedAt
			}
		}
	}
	return out, nil
}

// UserAccount is a row of user_account. BalanceFen changes only in the
// transaction that inserts the matching LedgerEntry.
type UserAccount struct {
	ID          uint64          `gorm:"column:id;primaryKey"`
	Username    string          `gorm:"column:username"`
	Email       *string         `gorm:"column:email"`
	BalanceFen  decimal.Decimal `gorm:"column:balance_fen;type:decimal(20,8)"`
	LedgerSeq   uint64          `gorm:"column:ledger_seq"`  // seq of the user's last ledger entry
	HotEntries  uint64          `gorm:"column:hot_entries"` // entries written to be settled into the Redis balance
	ProExpireAt *time.Time      `gorm:"column:pro_expire_at"`
	CreatedAt   time.Time       `gorm:"column:created_at"`
	UpdatedAt   time.Time       `gorm:"column:updated_at"`
}

// TableName is the table gorm maps UserAccount to.
func (UserAccount) TableName() string { return "user_account" }

// List returns the accounts of usernames that exist, in no order.
func (a *Accounts) List(ctx context.Context, usernames []string) ([]UserAccount, error) {
	var rows []UserAccount
	if err := a.db.WithContext(ctx).Where("username IN ?", usernames).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: accounts of %d users: %w", len(usernames), err)
	}
	return rows, nil
}
