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

// PendingOf returns the pending deductions of users, in one pipeline.
func (r *Redis) PendingOf(ctx context.Context, users []string) (map[string][]PendingDeduction, error) {
	cmds := make([]*redis.MapStringStringCmd, len(users))
	_, err := r.Client(keys.DBAgentBilling).Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			cmds[i] = p.HGetAll(ctx, r.keys.AgentPending(u))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: pending deductions: %w", err)
	}
	out := make(map[string][]PendingDeduction, len(users))
	for i, u := range users {
		for id, v := range cmds[i].Val() {
			amount, at, ok := strings.Cut(v, "|")
			d, err := decimal.NewFromString(amount)
			ms, err2 := strconv.ParseInt(at, 10, 64)
			if !ok || err != nil || err2 != nil {
				return nil, fmt.Errorf("store: pending deduction %s of %s: malformed entry %q", id, u, v)
			}
			out[u] = append(out[u], PendingDeduction{ID: id, Deducted: d, At: time.UnixMilli(ms)})
		}
	}
	return out, nil
}

// HotBalance is a user's Redis side at one moment.
type HotBalance struct {
	Balance decimal.Decimal
	Present bool // the balance key exists and parses
	Pending int64
}

// HotBalances reads the balance and the number of pending deductions of
// users in one MULTI/EXEC, so each pair is consistent.
func (r *Redis) HotBalances(ctx context.Context, users []string) (map[string]HotBalance, error) {
	gets := make([]*redis.StringCmd, len(users))
	lens := make([]*redis.IntCmd, len(users))
	_, err := r.Client(keys.DBAgentBilling).TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			gets[i] = p.Get(ctx, r.keys.AgentBalance(u))
			lens[i] = p.HLen(ctx, r.keys.AgentPending(u))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: hot balances: %w", err)
	}
	out := make(map[string]HotBalance, len(users))
	for i, u := range users {
		h := HotBalance{Pending: lens[i].Val()}
		if v, err := gets[i].Result(); err == nil {
			if d, err := decimal.NewFromString(v); err == nil {
				h.Balance, h.Present = d, true
			}
		}
		out[u] = h
	}
	return out, nil
}

// CleanLate removes, for users whose balance is missing, the late entries
// older than age: any later initialisation reads a MySQL that has them.
// A balance that exists keeps its late hash (its initialisation consumed
// what it needed). It returns how many entries it removed.
func (r *Redis) CleanLate(ctx context.Context, users []string, age time.Duration, now time.Time) (int, error) {
	c := r.Client(keys.DBAgentBilling)
	removed := 0
	for _, u := range users {
		n, err := c.Exists(ctx, r.keys.AgentBalance(u)).Result()
		if err != nil || n == 1 {
			if err != nil {
				return removed, fmt.Errorf("store: clean late entries of %s: %w", u, err)
			}
			continue
		}
		entries, err := c.HGetAll(ctx, r.keys.AgentBalanceLate(u)).Result()
		if err != nil {
			return removed, fmt.Errorf("store: clean late entries of %s: %w", u, err)
		}
		var old []string
		for field, v := range entries {
			parts := strings.Split(v, "|")
			ms, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
			if err != nil || now.Sub(time.UnixMilli(ms)) > age {
				old = append(old, field)
			}
		}
		if len(old) > 0 {
			if err := c.HDel(ctx, r.keys.AgentBalanceLate(u), old...).Err(); err != nil {
				return removed, fmt.Errorf("store: clean late entries of %s: %w", u, err)
			}
			removed += len(old)
		}
	}
	return removed, nil
}
