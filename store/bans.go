package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
	"unicode/utf16"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// bloomPositions are the bitmap offsets of a username in the ban Bloom
// filter (seed 000: 1,000,003 bits, 6 hash functions, CRC32 and Java's
// String.hashCode combined by double hashing): offset_i = (h1 + i*h2) mod m.
func bloomPositions(username string) [keys.BanBloomHashes]int64 {
	h1 := int64(crc32.ChecksumIEEE([]byte(username)))
	h2 := int64(javaHashCode(username))
	var pos [keys.BanBloomHashes]int64
	for i := range pos {
		p := (h1 + int64(i)*h2) % keys.BanBloomBits
		if p < 0 {
			p += keys.BanBloomBits
		}
		pos[i] = p
	}
	return pos
}

// javaHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... over UTF-16 units.
func javaHashCode(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// IsBanned reports whether username is banned: the Bloom bitmap answers
// "certainly not" for almost every user in one round trip, and the exact set
// settles the rest (so there are no false positives).
func (r *Redis) IsBanned(ctx context.Context, username string) (bool, error) {
	c := r.Client(keys.DBUserBan)
	args := make([]any, 0, 3*keys.BanBloomHashes) // GET, type, offset per hash
	for _, p := range bloomPositions(username) {
		args = append(args, "GET", "u1", p)
	}
	bits, err := c.BitField(ctx, r.keys.BanBloom(), args...).Result()
	if err != nil {
		return false, fmt.Errorf("store: ban bloom: %w", err)
	}
	for _, b := range bits {
		if b == 0 {
			return false, nil
		}
	}
	banned, err := c.SIsMember(ctx, r.keys.BanSet(), username).Result()
	if err != nil {
		return false, fmt.Errorf("store: ban set: %w", err)
	}
	return banned, nil
}

// markBanned sets the Bloom bits and adds to the exact set, in one round trip.
func (r *Redis) markBanned(ctx context.Context, usernames ...string) error {
	if len(usernames) == 0 {
		return nil
	}
	_, err := r.Client(keys.DBUserBan).TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, u := range usernames {
			for _, pos := range bloomPositions(u) {
				p.SetBit(ctx, r.keys.BanBloom(), pos, 1)
			}
			p.SAdd(ctx, r.keys.BanSet(), u)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: ban: %w", err)
	}
	return nil
}

// UserBan is a row of user_ban.
type UserBan struct {
	Username string    `gorm:"column:username;primaryKey"`
	Reason   string    `gorm:"column:reason"`
	BannedAt time.Time `gorm:"column:banned_at"`
}

func (UserBan) TableName() string { return "user_ban" }

// Ban records a ban in MySQL (the durable source) and in Redis (what the
// API checks). Banning twice keeps the first time and updates the reason.
func Ban(ctx context.Context, db *gorm.DB, r *Redis, username, reason string) error {
	if username == "" {
		return errors.New("store: ban: empty username")
	}
	err := db.WithContext(ctx).Clauses(clause.OnConflict{DoUpdates: clause.AssignmentColumns([]string{"reason"})}).
		Create(&UserBan{Username: username, Reason: reason, BannedAt: time.Now().UTC()}).Error
	if err != nil {
		return fmt.Errorf("store: ban %s: %w", username, err)
	}
	return r.markBanned(ctx, username)
}

// Unban removes a ban. The Bloom bits stay (other names may share them); the
// exact set decides.
func Unban(ctx context.Context, db *gorm.DB, r *Redis, username string) (bool, error) {
	res := db.WithContext(ctx).Where("username = ?", username).Delete(&UserBan{})
	if res.Error != nil {
		return false, fmt.Errorf("store: unban %s: %w", username, res.Error)
	}
	if err := r.Client(keys.DBUserBan).SRem(ctx, r.keys.BanSet(), username).Err(); err != nil {
		return false, fmt.Errorf("store: unban %s: %w", username, err)
	}
	return res.RowsAffected == 1, nil
}

// RestoreBans puts every ban of MySQL back into Redis when the exact set is
// missing (Redis restarted without its data) and reports how many it restored.
func RestoreBans(ctx context.Context, db *gorm.DB, r *Redis) (int, error) {
	n, err := r.Client(keys.DBUserBan).Exists(ctx, r.keys.BanSet()).Result()
	if err != nil || n == 1 {
		return 0, err
	}
	var names []string
	if err := db.WithContext(ctx).Model(&UserBan{}).Pluck("username", &names).Error; err != nil {
		return 0, fmt.Errorf("store: restore bans: %w", err)
	}
	for start := 0; start < len(names); start += 500 {
		if err := r.markBanned(ctx, names[start:min(start+500, len(names))]...); err != nil {
			return start, err
		}
	}
	return len(names), nil
}
