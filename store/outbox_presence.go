package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// RelayPresence tells the other relays that one is alive: a MySQL named
// lock held on a connection of its own while the relay runs, and a row of
// outbox_relay naming the lock (doc/outbox.md, "A relay that dies"). A
// process that dies takes its connections with it, and MySQL frees the
// lock at once: a relay that finds rows claimed by a listed owner whose lock
// is free puts them back without waiting for their lease (Outbox.Rescue).
// It is not safe for concurrent use.
type RelayPresence struct {
	db       *gorm.DB
	owner    string
	instance string // this start of the owner: the row deleted is ours
	lock     string // "" until the database's name is known
	conn     *sql.Conn
}

// ErrRelayOwnerLive is an owner whose lock another running relay holds.
var ErrRelayOwnerLive = errors.New("store: another running relay has the same owner name")

// NewRelayPresence returns the presence of the relay named owner; it holds
// nothing until Hold.
func NewRelayPresence(db *gorm.DB, owner string) *RelayPresence {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &RelayPresence{db: db, owner: owner, instance: hex.EncodeToString(b)}
}

// lockName is the named lock of owner in database: named locks are the
// server's, not a database's, so the database is part of it (tests run
// relays of the same owner name in databases of their own). MySQL allows
// 64 characters.
func lockName(database, owner string) string {
	sum := sha256.Sum256([]byte(database + "\x00" + owner))
	return "isle.relay." + hex.EncodeToString(sum[:20])
}

// Hold makes sure the relay holds its lock and is listed: it checks the
// lock's connection, and takes the lock again on a new one when that
// connection was lost (MySQL restarted, or the network cut it: meanwhile
// the others may have put this relay's claimed rows back, which costs only
// duplicates). It returns ErrRelayOwnerLive when another relay holds the lock.
func (p *RelayPresence) Hold(ctx context.Context) error {
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
		return fmt.Errorf("store: relay presence: %w", err)
	}
	if p.lock == "" {
		var database string
		if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&database); err != nil {
			_ = conn.Close()
			return fmt.Errorf("store: relay presence: %w", err)
		}
		p.lock = lockName(database, p.owner)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", p.lock).Scan(&got); err != nil {
		_ = conn.Close()
		return fmt.Errorf("store: relay presence: take lock: %w", err)
	}
	if got.Int64 != 1 {
		_ = conn.Close()
		return fmt.Errorf("%w: %q", ErrRelayOwnerLive, p.owner)
	}
	err = p.db.WithContext(ctx).Exec("INSERT INTO outbox_relay (owner, instance, lock_name) VALUES (?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE instance = VALUES(instance), lock_name = VALUES(lock_name), started_at = CURRENT_TIMESTAMP(6)",
		p.owner, p.instance, p.lock).Error
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("store: relay presence: list: %w", err)
	}
	p.conn = conn
	return nil
}

// Leave unlists the relay and frees its lock: it claims nothing more.
func (p *RelayPresence) Leave(ctx context.Context) {
	if p.conn == nil {
		return
	}
	_ = p.db.WithContext(ctx).Exec("DELETE FROM outbox_relay WHERE owner = ? AND instance = ?", p.owner, p.instance).Error
	_, _ = p.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", p.lock)
	_ = p.conn.Close()
	p.conn = nil
}

// Rescue finds the listed relays other than self that are gone (their lock
// is free), puts back in each table the rows they had claimed, and unlists
// them. It returns the rows put back by table and the owners found gone.
// Both statements test the lock again as they run, so a relay that took its
// lock back meanwhile keeps its rows and its listing.
func (o *Outbox) Rescue(ctx context.Context, self string, tables []string) (map[string]int, []string, error) {
	for _, t := range tables {
		if err := outboxTable(t); err != nil {
			return nil, nil, err
		}
	}
	db := o.db.WithContext(ctx)
	var listed []struct {
		Owner    string
		Instance string
		LockName string
		Free     sql.NullInt64
	}
	err := db.Raw("SELECT owner, instance, lock_name, IS_FREE_LOCK(lock_name) AS free FROM outbox_relay WHERE owner <> ?", self).
		Scan(&listed).Error
	if err != nil {
		return nil, nil, fmt.Errorf("store: rescue: read relays: %w", err)
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
				return put, gone, fmt.Errorf("store: rescue: put back rows of %s in %s: %w", r.Owner, t, res.Error)
			}
			if res.RowsAffected > 0 {
				put[t] += int(res.RowsAffected)
			}
		}
		res := db.Exec("DELETE FROM outbox_relay WHERE owner = ? AND instance = ? AND IS_FREE_LOCK(lock_name) = 1", r.Owner, r.Instance)
		if res.Error != nil {
			return put, gone, fmt.Errorf("store: rescue: unlist %s: %w", r.Owner, res.Error)
		}
		if res.RowsAffected > 0 {
			gone = append(gone, r.Owner)
		}
	}
	return put, gone, nil
}
