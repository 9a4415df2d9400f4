package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
)

// ScanUsers walks the users that have a key of family f (agent:balance:*,
// agent:pending:*, ...) in batches of up to n usernames, SCAN by SCAN.
func (r *Redis) ScanUsers(ctx context.Context, f *keys.Family, n int, each func(users []string) error) error {
	iter := r.Client(f.DB).Scan(ctx, 0, r.keys.Pattern(f), int64(n)).Iterator()
	batch := make([]string, 0, n)
	for iter.Next(ctx) {
		u, ok := r.keys.Trim(f, iter.Val())
		if !ok || u == "" {
			continue
		}
		if batch = append(batch, u); len(batch) == n {
			if err := each(batch); err != nil {
				return err
			}
			batch = make([]string, 0, n)
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("store: scan %s: %w", f.Template, err)
	}
	if len(batch) > 0 {
		return each(batch)
	}
	return nil
}

// HotBalance is a user's Redis side at one moment.
type HotBalance struct {
	Balance   decimal.Decimal
	Present   bool   // the balance key exists and parses
	Malformed string // the key exists but holds this, which is no balance (not a decimal, or negative)
	Pending   int64
	// Entries is how many ledger entries the balance reflects (compare
	// with user_account.hot_entries); EntriesKnown is false when the count
	// is missing or unreadable.
	Entries      uint64
	EntriesKnown bool
	raw, rawN    string // as read, for ResetBalance's check
}

// Hot reads the balance, the number of pending deductions and the
// count of reflected entries of users in one MULTI/EXEC, so each is
// consistent with the others.
func (b *Balances) Hot(ctx context.Context, users []string) (map[string]HotBalance, error) {
	r := b.r
	gets := make([]*redis.StringCmd, len(users))
	counts := make([]*redis.StringCmd, len(users))
	lens := make([]*redis.IntCmd, len(users))
	_, err := r.Client(keys.DBAgentBilling).TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			gets[i] = p.Get(ctx, r.keys.AgentBalance(u))
			lens[i] = p.HLen(ctx, r.keys.AgentPending(u))
			counts[i] = p.Get(ctx, r.keys.AgentBalanceEntries(u))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: hot balances: %w", err)
	}
	out := make(map[string]HotBalance, len(users))
	for i, u := range users {
		h := HotBalance{Pending: lens[i].Val(), raw: gets[i].Val(), rawN: counts[i].Val()}
		if v, err := gets[i].Result(); err == nil {
			if d, err := decimal.NewFromString(v); err == nil && !d.IsNegative() {
				h.Balance, h.Present = d, true
			} else {
				h.Malformed = v
			}
		}
		if n, err := strconv.ParseUint(h.rawN, 10, 64); err == nil {
			h.Entries, h.EntriesKnown = n, true
		}
		out[u] = h
	}
	return out, nil
}

// Reset drops a hot balance found behind MySQL, if it is still as h
// read it and no deduction is pending, so that the next read initialises it
// from MySQL (EnsureBalance); it reports whether it dropped it.
func (b *Balances) Reset(ctx context.Context, username string, h HotBalance) (bool, error) {
	r := b.r
	k := []string{r.keys.AgentBalance(username), r.keys.AgentPending(username), r.keys.AgentBalanceEntries(username), r.keys.AgentBalanceInit(username)}
	n, err := resetBalanceScript.Run(ctx, r.Client(keys.DBAgentBilling), k, h.raw, h.rawN).Int()
	if err != nil {
		return false, fmt.Errorf("store: reset balance of %s: %w", username, err)
	}
	return n == 1, nil
}

// CleanLate removes, for users whose balance is missing, the late entries
// older than age: any later initialisation reads a MySQL that has them.
// A balance that exists keeps its late hash (its initialisation consumed
// what it needed). It returns how many entries it removed, and apart the
// users whose keys Redis refused to read (a key of the wrong type): they are
// skipped. It reads all users in one pipeline and removes in a second, so a
// batch costs two round trips whatever its size.
func (b *Balances) CleanLate(ctx context.Context, users []string, age time.Duration, now time.Time) (int, map[string]error, error) {
	r := b.r
	c := r.Client(keys.DBAgentBilling)
	old, bad, err := r.oldLateEntries(ctx, c, users, age, now)
	if err != nil || len(old) == 0 {
		return 0, bad, err
	}
	n, err := r.dropLateEntries(ctx, c, old)
	return n, bad, err
}

// lateFields are the fields of one user's late hash to remove.
type lateFields struct {
	user   string
	fields []string
}

// oldLateEntries returns, in the order of users, the late entries older than
// age of the users whose balance is missing, and the users whose keys Redis
// answered with an error of its own (redis.Error: the key, not the
// connection, is at fault).
func (r *Redis) oldLateEntries(ctx context.Context, c *redis.Client, users []string, age time.Duration, now time.Time) ([]lateFields, map[string]error, error) {
	exists := make([]*redis.IntCmd, len(users))
	late := make([]*redis.MapStringStringCmd, len(users))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			exists[i] = p.Exists(ctx, r.keys.AgentBalance(u))
			late[i] = p.HGetAll(ctx, r.keys.AgentBalanceLate(u))
		}
		return nil
	})
	var old []lateFields
	bad := make(map[string]error)
	for i, u := range users {
		// Each command carries its own error, so the message can name its user.
		err := errors.Join(exists[i].Err(), late[i].Err())
		var rerr redis.Error
		switch {
		case errors.As(err, &rerr):
			bad[u] = fmt.Errorf("store: clean late entries of %s: %w", u, err)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("store: clean late entries of %s: %w", u, err)
		case exists[i].Val() == 1:
			continue
		}
		if fields := olderThan(late[i].Val(), age, now); len(fields) > 0 {
			old = append(old, lateFields{user: u, fields: fields})
		}
	}
	return old, bad, nil
}

// olderThan returns the fields of a late hash whose entry ("...|ms") was
// written more than age before now. An entry whose time does not parse is
// old too: nothing would ever remove it otherwise.
func olderThan(entries map[string]string, age time.Duration, now time.Time) []string {
	var old []string
	for field, v := range entries {
		parts := strings.Split(v, "|")
		ms, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
		if err != nil || now.Sub(time.UnixMilli(ms)) > age {
			old = append(old, field)
		}
	}
	return old
}

// dropLateEntries removes the fields in one pipeline and returns how many
// it removed: those of the users before the first that failed.
func (r *Redis) dropLateEntries(ctx context.Context, c *redis.Client, old []lateFields) (int, error) {
	cmds := make([]*redis.IntCmd, len(old))
	_, perr := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, o := range old {
			cmds[i] = p.HDel(ctx, r.keys.AgentBalanceLate(o.user), o.fields...)
		}
		return nil
	})
	removed := 0
	for i, o := range old {
		if err := cmds[i].Err(); err != nil {
			return removed, fmt.Errorf("store: clean late entries of %s: %w", o.user, err)
		}
		removed += len(o.fields)
	}
	if perr != nil {
		return removed, fmt.Errorf("store: clean late entries: %w", perr)
	}
	return removed, nil
}
