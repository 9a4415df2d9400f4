package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"
	"unicode/utf16"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Bans are the banned users: the user_ban rows (the record) and the Bloom
// bitmap and exact set in Redis the API checks, kept in step by a ban
// generation.
type Bans struct {
	db *gorm.DB
	r  *Redis
}

// NewBans returns the bans of db, checked in r.
func NewBans(db *gorm.DB, r *Redis) *Bans { return &Bans{db: db, r: r} }

// bloomPositions are the bitmap offsets of a username in the ban Bloom
// filter (doc/keys.md; as the Spring backend builds it: 1,000,003 bits, 6 hash functions, CRC32 and Java's
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

// BanState is what Redis says of one user: banned or not, and the ban
// generation its list reflects (see Bans.Rebuild).
type BanState struct {
	Banned     bool
	Generation int64 // -1: Redis holds none (it lost its data, or no list was built yet)
}

// State checks username against Redis's ban list: the Bloom bitmap
// answers "certainly not" for almost every user in one round trip, which
// also reads the list's generation, and the exact set settles the rest (so
// there are no false positives).
func (bs *Bans) State(ctx context.Context, username string) (BanState, error) {
	r := bs.r
	c := r.Client(keys.DBUserBan)
	args := make([]any, 0, 3*keys.BanBloomHashes) // GET, type, offset per hash
	for _, p := range bloomPositions(username) {
		args = append(args, "GET", "u1", p)
	}
	var (
		bits *redis.IntSliceCmd
		gen  *redis.StringCmd
	)
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		bits = p.BitField(ctx, r.keys.BanBloom(), args...)
		gen = p.Get(ctx, r.keys.BanGeneration())
		return nil
	})
	if err := bits.Err(); err != nil {
		return BanState{}, fmt.Errorf("store: ban bloom: %w", err)
	}
	st := BanState{Generation: -1}
	if g, err := gen.Result(); err == nil {
		st.Generation = parseGeneration(g)
	} else if !errors.Is(err, redis.Nil) {
		return BanState{}, fmt.Errorf("store: ban generation: %w", err)
	}
	for _, b := range bits.Val() {
		if b == 0 {
			return st, nil
		}
	}
	banned, err := c.SIsMember(ctx, r.keys.BanSet(), username).Result()
	if err != nil {
		return BanState{}, fmt.Errorf("store: ban set: %w", err)
	}
	st.Banned = banned
	return st, nil
}

// IsBanned reports whether Redis's ban list holds username.
func (bs *Bans) IsBanned(ctx context.Context, username string) (bool, error) {
	st, err := bs.State(ctx, username)
	return st.Banned, err
}

// parseGeneration reads a generation Redis holds; -1 for one that is no
// number (treated as none, so the list is rebuilt).
func parseGeneration(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// applyBan writes one ban (or unban) that MySQL committed at generation gen
// into Redis's list, advancing its generation when it was at gen-1
// (ban_apply.lua).
func (r *Redis) applyBan(ctx context.Context, username string, ban bool, gen int64) error {
	k := r.keys
	args := []any{"0", username, gen, gen - 1}
	if ban {
		args[0] = "1"
		for _, p := range bloomPositions(username) {
			args = append(args, p)
		}
	}
	return banApplyScript.Run(ctx, r.Client(keys.DBUserBan), []string{k.BanBloom(), k.BanSet(), k.BanGeneration()}, args...).Err()
}

// UserBan is a row of user_ban.
type UserBan struct {
	Username string    `gorm:"column:username;primaryKey"`
	Reason   string    `gorm:"column:reason"`
	BannedAt time.Time `gorm:"column:banned_at"`
}

// TableName is the table gorm maps UserBan to.
func (UserBan) TableName() string { return "user_ban" }

// List returns every ban, the oldest first.
func (bs *Bans) List(ctx context.Context) ([]UserBan, error) {
	var bans []UserBan
	if err := bs.db.WithContext(ctx).Order("banned_at, username").Find(&bans).Error; err != nil {
		return nil, fmt.Errorf("store: list bans: %w", err)
	}
	return bans, nil
}

// Ban records a ban in MySQL (the durable source) and in Redis (what the
// API checks). Banning twice keeps the first time and updates the reason.
// Each ban advances the ban generation (Bans.Rebuild). When Redis cannot be
// written the ban still stands in MySQL, and the API's check puts it into
// Redis within its period; the error says so.
func (bs *Bans) Ban(ctx context.Context, username, reason string) error {
	db, r := bs.db, bs.r
	if username == "" {
		return errors.New("store: ban: empty username")
	}
	var gen int64
	err := sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		var err error
		if gen, err = nextBanGeneration(tx); err != nil {
			return err
		}
		return tx.Clauses(clause.OnConflict{DoUpdates: clause.AssignmentColumns([]string{"reason"})}).
			Create(&UserBan{Username: username, Reason: reason, BannedAt: time.Now().UTC()}).Error
	})
	if err != nil {
		return fmt.Errorf("store: ban %s: %w", username, err)
	}
	if err := r.applyBan(ctx, username, true, gen); err != nil {
		return fmt.Errorf("store: ban %s: recorded in MySQL, not in Redis, which the API's ban check restores from MySQL: %w", username, err)
	}
	return nil
}

// Unban removes a ban and reports whether there was one. The Bloom bits
// stay (other names may share them; a rebuild clears them); the exact set
// decides. Like Ban, it advances the generation, and a Redis it cannot
// write is corrected by the API's check.
func (bs *Bans) Unban(ctx context.Context, username string) (bool, error) {
	db, r := bs.db, bs.r
	var (
		gen int64
		was bool
	)
	err := sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		var err error
		if gen, err = nextBanGeneration(tx); err != nil {
			return err
		}
		res := tx.Where("username = ?", username).Delete(&UserBan{})
		was = res.RowsAffected == 1
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("store: unban %s: %w", username, err)
	}
	if err := r.applyBan(ctx, username, false, gen); err != nil {
		return was, fmt.Errorf("store: unban %s: recorded in MySQL, not in Redis, which the API's ban check restores from MySQL: %w", username, err)
	}
	return was, nil
}
