package relay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// presence tells the other relays that this one is alive: a MySQL named lock
// held on a connection of its own while the relay runs, and a row of
// outbox_relay naming the lock (doc/outbox.md, "A relay that dies"). A
// process that dies takes its connections with it, and MySQL frees the
// lock at once: a relay that finds rows claimed by a listed owner whose lock
// is free puts them back without waiting for their lease (rescue).
type presence struct {
	db       *gorm.DB
	owner    string
	instance string // this start of the owner: the row deleted is ours
	lock     string // "" until the database's name is known
	conn     *sql.Conn
}

// errOwnerLive is an owner whose lock another running relay holds.
var errOwnerLive = errors.New("relay: another running relay has the same owner name")

func newPresence(db *gorm.DB, owner string) *presence {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &presence{db: db, owner: owner, instance: hex.EncodeToString(b)}
}

// lockName is the named lock of owner in database: named locks are the
// server's, not a database's, so the database is part of it (tests run
// relays of the same owner name in databases of their own). MySQL allows
// 64 characters.
func lockName(database, owner string) string {
	sum := sha256.Sum256([]byte(database + "\x00" + owner))
	return "isle.relay." + hex.EncodeToString(sum[:20])
}

// hold makes sure this relay holds its lock and is listed: it checks the
// lock's connection, and takes the lock again on a new one when that
// connection was lost (MySQL restarted, or the network cut it: meanwhile
// the others may have put this relay's claimed rows back, which costs only
// duplicates). It returns errOwnerLive when another relay holds the lock.
func (p *presence) hold(ctx context.Context) error {
	if p.conn != nil {
		var mine sql.NullBool
		err := p.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", p.lock).Scan(&mine)
		if err == nil && mine.Valid && mine.Bool {
			return nil
		}
		_ = p.conn.Close()
		p.conn = nil
	}
	sqlDB, err := p.db.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("relay: presence: %w", err)
	}
	if p.lock == "" {
		var database string
		if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&database); err != nil {
			_ = conn.Close()
			return fmt.Errorf("relay: presence: %w", err)
		}
		p.lock = lockName(database, p.owner)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", p.lock).Scan(&got); err != nil {
		_ = conn.Close()
		return fmt.Errorf("relay: presence: take lock: %w", err)
	}
	if got.Int64 != 1 {
		_ = conn.Close()
		return fmt.Errorf("%w: %q", errOwnerLive, p.owner)
	}
	err = p.db.WithContext(ctx).Exec("INSERT INTO outbox_relay (owner, instance, lock_name) VALUES (?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE instance = VALUES(instance), lock_name = VALUES(lock_name), started_at = CURRENT_TIMESTAMP(6)",
		p.owner, p.instance, p.lock).Error
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("relay: presence: list: %w", err)
	}
	p.conn = conn
	return nil
}

// leave unlists this relay and frees its lock: it claims nothing more.
func (p *presence) leave(ctx context.Context) {
	if p.conn == nil {
		return
	}
	_ = p.db.WithContext(ctx).Exec("DELETE FROM outbox_relay WHERE owner = ? AND instance = ?", p.owner, p.instance).Error
	_, _ = p.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", p.lock)
	_ = p.conn.Close()
	p.conn = nil
}

// rescue finds the listed relays that are gone (their lock is free), puts
// back in each table the rows they had claimed, and unlists them. It
// returns the rows put back by table and the owners found gone. Both
// statements test the lock again as they run, so a relay that took its
// lock back meanwhile keeps its rows and its listing.
func rescue(ctx context.Context, db *gorm.DB, self string, tables []string) (map[string]int, []string, error) {
	db = db.WithContext(ctx)
	var listed []struct {
		Owner    string
		Instance string
		LockName string
		Free     sql.NullInt64
	}
	err := db.Raw("SELECT owner, instance, lock_name, IS_FREE_LOCK(lock_name) AS free FROM outbox_relay WHERE owner <> ?", self).
		Scan(&listed).Error
	if err != nil {
		return nil, nil, fmt.Errorf("relay: rescue: read relays: %w", err)
	}
	put := map[string]int{}
	var gone []string
	for _, r := range listed {
		if !r.Free.Valid || r.Free.Int64 != 1 {
			continue // alive, or MySQL cannot tell: the lease decides
		}
		for _, t := range tables {
			res := db.Exec("UPDATE "+t+" SET claimed_by = NULL, available_at = NOW(6)"+
				" WHERE published_at IS NULL AND claimed_by LIKE ? AND IS_FREE_LOCK(?) = 1", likePrefix(r.Owner+"/"), r.LockName)
			if res.Error != nil {
				return put, gone, fmt.Errorf("relay: rescue: put back rows of %s in %s: %w", r.Owner, t, res.Error)
			}
			if res.RowsAffected > 0 {
				put[t] += int(res.RowsAffected)
			}
		}
		res := db.Exec("DELETE FROM outbox_relay WHERE owner = ? AND instance = ? AND IS_FREE_LOCK(lock_name) = 1", r.Owner, r.Instance)
		if res.Error != nil {
			return put, gone, fmt.Errorf("relay: rescue: unlist %s: %w", r.Owner, res.Error)
		}
		if res.RowsAffected > 0 {
			gone = append(gone, r.Owner)
		}
	}
	return put, gone, nil
}

// likePrefix is a LIKE pattern matching the strings that start with s.
func likePrefix(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s) + "%"
}
