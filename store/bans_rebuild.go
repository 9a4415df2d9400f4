package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// The ban generation orders every change of the ban list. MySQL holds it
// in user_ban_generation, advanced in the transaction of each ban and
// unban, which it also serialises; Redis holds the generation its list
// reflects in user:ban:generation, advanced with each change it receives in
// order. A Redis whose generation is missing or differs from MySQL's has
// lost changes (a restart without its data, an older RDB or AOF, a lagging
// replica) or missed one; Bans.Rebuild then replaces its list with MySQL's.

// nextBanGeneration advances MySQL's ban generation in tx and returns it.
// The row stays locked until tx ends, so changes commit in generation order.
func nextBanGeneration(tx *gorm.DB) (int64, error) {
	err := tx.Exec("INSERT INTO user_ban_generation (id, generation) VALUES (1, 1) ON DUPLICATE KEY UPDATE generation = generation + 1").Error
	if err != nil {
		return 0, fmt.Errorf("ban generation: %w", err)
	}
	var gen int64
	if err := tx.Raw("SELECT generation FROM user_ban_generation WHERE id = 1").Scan(&gen).Error; err != nil {
		return 0, fmt.Errorf("ban generation: %w", err)
	}
	return gen, nil
}

// Generation returns MySQL's ban generation (0 before the first change).
func (bs *Bans) Generation(ctx context.Context) (int64, error) {
	db := bs.db
	var gens []int64
	if err := db.WithContext(ctx).Raw("SELECT generation FROM user_ban_generation WHERE id = 1").Scan(&gens).Error; err != nil {
		return 0, fmt.Errorf("store: ban generation: %w", err)
	}
	if len(gens) == 0 {
		return 0, nil
	}
	return gens[0], nil
}

// HotGeneration returns the generation Redis's ban list reflects, -1 when
// Redis holds none.
func (bs *Bans) HotGeneration(ctx context.Context) (int64, error) {
	r := bs.r
	s, err := r.Client(keys.DBUserBan).Get(ctx, r.keys.BanGeneration()).Result()
	if errors.Is(err, redis.Nil) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: ban generation: %w", err)
	}
	return parseGeneration(s), nil
}

// BannedInMySQL reports whether user_ban holds username: the answer for
// a user while Redis's list is known to be behind.
func (bs *Bans) BannedInMySQL(ctx context.Context, username string) (bool, error) {
	db := bs.db
	var n int64
	if err := db.WithContext(ctx).Model(&UserBan{}).Where("username = ?", username).Limit(1).Count(&n).Error; err != nil {
		return false, fmt.Errorf("store: ban of %s: %w", username, err)
	}
	return n > 0, nil
}

// BanRebuild is what Bans.Rebuild did.
type BanRebuild struct {
	Users      int   // bans MySQL holds
	Generation int64 // MySQL's generation they were read at
	Replaced   bool  // false: Redis's generation changed meanwhile, and its list was left alone
}

// rebuildBatch is how many users one pipeline adds to a rebuilt list.
const rebuildBatch = 500

// Rebuild replaces Redis's ban list (exact set, Bloom bitmap and
// generation) with MySQL's, read in one snapshot, so bans since an older
// Redis come back and unbans since are honoured (the old Bloom bits go too).
// The list is built under keys of its own and swapped in atomically, and only
// if Redis still holds generation seen (-1: none), as read before the call:
// a change that came in meanwhile, or another process's rebuild, is never
// overwritten by an older list (the caller compares again instead).
func (bs *Bans) Rebuild(ctx context.Context, seen int64) (BanRebuild, error) {
	db, r := bs.db, bs.r
	var (
		res   BanRebuild
		names []string
	)
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var gens []int64
		if err := tx.Raw("SELECT generation FROM user_ban_generation WHERE id = 1").Scan(&gens).Error; err != nil {
			return err
		}
		if len(gens) == 1 {
			res.Generation = gens[0]
		}
		return tx.Model(&UserBan{}).Order("username").Pluck("username", &names).Error
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return res, fmt.Errorf("store: rebuild bans: read MySQL: %w", err)
	}
	res.Users = len(names)

	id := make([]byte, 8)
	_, _ = rand.Read(id)
	k, c := r.keys, r.Client(keys.DBUserBan)
	tmpBloom, tmpSet := k.BanBloomRebuild(hex.EncodeToString(id)), k.BanSetRebuild(hex.EncodeToString(id))
	for start := 0; start < len(names); start += rebuildBatch {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, u := range names[start:min(start+rebuildBatch, len(names))] {
				for _, pos := range bloomPositions(u) {
					p.SetBit(ctx, tmpBloom, pos, 1)
				}
				p.SAdd(ctx, tmpSet, u)
			}
			p.PExpire(ctx, tmpBloom, keys.BanRebuildTTL) // gone if this process dies before the swap
			p.PExpire(ctx, tmpSet, keys.BanRebuildTTL)
			return nil
		})
		if err != nil {
			c.Del(context.WithoutCancel(ctx), tmpBloom, tmpSet)
			return res, fmt.Errorf("store: rebuild bans: %w", err)
		}
	}
	was := ""
	if seen >= 0 {
		was = strconv.FormatInt(seen, 10)
	}
	n, err := banSwapScript.Run(ctx, c, []string{k.BanBloom(), k.BanSet(), k.BanGeneration(), tmpBloom, tmpSet}, was, res.Generation).Int()
	if err != nil {
		c.Del(context.WithoutCancel(ctx), tmpBloom, tmpSet)
		return res, fmt.Errorf("store: rebuild bans: swap: %w", err)
	}
	res.Replaced = n == 1
	return res, nil
}
