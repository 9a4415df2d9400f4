package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Usage is one request's usage of a model.
type Usage struct {
	// RequestID is the usage's key, counted once: RequestKey of a
	// message's request id, or ForeignKey of a message without one. A
	// RequestKey also finds the request counted by an older build under the
	// request id alone.
	RequestID string
	// SameBody is set for a message without an id that the broker
	// delivered again: the prefix of the ids of every message with its
	// body. One counted stands for this message's first delivery (doc/money.md,
	// "Messages without ids"): the usage is counted only if none was.
	SameBody        string
	Model           string
	Day             time.Time // the day it counts for (its date is used)
	InputTokens     int64
	CachedTokens    int64
	OutputTokens    int64
	ReasoningTokens int64
	CostMicroFen    int64
}

// UsageStats are the per-model usage statistics: agent_usage_stats by day
// in MySQL, each request counted once (agent_usage_event), and the running
// counters agent:usage:{model} in Redis.
type UsageStats struct {
	db *gorm.DB
	r  *Redis
}

// NewUsageStats returns the statistics of db and r.
func NewUsageStats(db *gorm.DB, r *Redis) *UsageStats { return &UsageStats{db: db, r: r} }

// ApplyUsage counts each usage once (agent_usage_event) and adds the ones
// counted now to agent_usage_stats, per model and day, in one transaction
// (ApplyUsageEach). It returns, for each usage, whether this call counted
// it, and the first usage's error.
func (st *UsageStats) ApplyUsage(ctx context.Context, us []Usage) ([]bool, error) {
	counted, errs := st.ApplyUsageEach(ctx, us)
	for _, err := range errs {
		if err != nil {
			return counted, err
		}
	}
	return counted, nil
}

// ApplyUsageEach counts each usage once (agent_usage_event) and adds the
// ones counted now to agent_usage_stats, per model and day, in one
// transaction. It returns, for each usage, whether this call counted it,
// or its error: the transaction's, or, when the transaction failed on a
// duplicate key and the usage's own transaction still does,
// ErrKeyMismatch, so that one usage does not hold back the others.
func (st *UsageStats) ApplyUsageEach(ctx context.Context, us []Usage) ([]bool, []error) {
	counted, err := st.applyUsage(ctx, us)
	errs := make([]error, len(us))
	if err == nil {
		return counted, errs
	}
	if !sqltx.IsDuplicate(err) {
		for i := range errs {
			errs[i] = err
		}
		return make([]bool, len(us)), errs
	}
	counted = make([]bool, len(us))
	for i, u := range us {
		one, err := st.applyUsage(ctx, []Usage{u})
		switch {
		case err == nil:
			counted[i] = one[0]
		case sqltx.IsDuplicate(err):
			errs[i] = fmt.Errorf("%w: usage %q: %v", ErrKeyMismatch, u.RequestID, err)
		default:
			errs[i] = err
		}
	}
	return counted, errs
}

func (st *UsageStats) applyUsage(ctx context.Context, us []Usage) ([]bool, error) {
	db := st.db
	counted := make([]bool, len(us))
	err := sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		clear(counted)
		ids := make([]string, 0, len(us))
		legacy := map[string]string{} // an older build's key of a request: its key now
		for _, u := range us {
			ids = append(ids, u.RequestID)
			if old := legacyRequestKey(u.RequestID); old != "" {
				ids = append(ids, old)
				legacy[old] = u.RequestID
			}
		}
		seen, err := lockUsageEvents(tx, ids)
		if err != nil {
			return err
		}
		known := make(map[string]bool, len(seen))
		since := time.Now().Add(-RedeliveryHorizon)
		for _, id := range seen {
			if key, ok := legacy[id]; ok {
				id = key
			}
			known[id] = true
		}
		for _, u := range us {
			if u.SameBody == "" || known[u.RequestID] {
				continue
			}
			var same []string
			if err := tx.Model(&UsageEvent{}).Clauses(clause.Locking{Strength: "UPDATE"}).
				Where("request_id LIKE ? AND created_at >= ?", likePrefix(u.SameBody), since).Limit(1).Pluck("request_id", &same).Error; err != nil {
				return err
			}
			known[u.RequestID] = len(same) > 0
		}
		var events []usageEventRow
		type dayKey struct {
			model string
			day   string
		}
		sums := map[dayKey]*UsageStat{}
		var order []dayKey
		for i, u := range us {
			if known[u.RequestID] {
				continue
			}
			known[u.RequestID], counted[i] = true, true
			events = append(events, usageEventRow{requestID: u.RequestID, model: u.Model})
			k := dayKey{u.Model, u.Day.Format(time.DateOnly)}
			s := sums[k]
			if s == nil {
				s = &UsageStat{ModelName: u.Model, StatDate: u.Day}
				sums[k] = s
				order = append(order, k)
			}
			s.InputTokens += uint64(max(u.InputTokens, 0))
			s.CachedTokens += uint64(max(u.CachedTokens, 0))
			s.OutputTokens += uint64(max(u.OutputTokens, 0))
			s.ReasoningTokens += uint64(max(u.ReasoningTokens, 0))
			s.CostMicroFen += uint64(max(u.CostMicroFen, 0))
			s.RequestCount++
		}
		if len(events) == 0 {
			return nil
		}
		if err := insertUsageEvents(tx, events); err != nil {
			return err
		}
		var sb strings.Builder
		var args []any
		sb.WriteString("INSERT INTO agent_usage_stats (model_name, stat_date, input_tokens, cached_tokens, output_tokens, reasoning_tokens, request_count, cost_micro_fen) VALUES ")
		for i, k := range order {
			if i > 0 {
				sb.WriteString(", ")
			}
			s := sums[k]
			sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, s.ModelName, k.day, s.InputTokens, s.CachedTokens, s.OutputTokens, s.ReasoningTokens, s.RequestCount, s.CostMicroFen)
		}
		sb.WriteString(` ON DUPLICATE KEY UPDATE input_tokens = input_tokens + VALUES(input_tokens),
			cached_tokens = cached_tokens + VALUES(cached_tokens), output_tokens = output_tokens + VALUES(output_tokens),
			reasoning_tokens = reasoning_tokens + VALUES(reasoning_tokens), request_count = request_count + VALUES(request_count),
			cost_micro_fen = cost_micro_fen + VALUES(cost_micro_fen)`)
		_, err = execSQL(tx, sb.String(), args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: apply %d usages: %w", len(us), err)
	}
	return counted, nil
}

// lockUsageEvents reads and locks the agent_usage_event rows of ids that
// exist, and returns their ids; the locking read of the primary key also
// holds the gaps of those not there yet. Like the ledger's hot statements
// (ledger_sql.go), it runs past gorm's statement building.
func lockUsageEvents(tx *gorm.DB, ids []string) ([]string, error) {
	q, args := inStrings("SELECT request_id FROM agent_usage_event WHERE request_id IN ", ids, " FOR UPDATE")
	rows, err := querySQL(tx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seen []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		seen = append(seen, id)
	}
	return seen, rows.Err()
}

// usageEventRow is a row of agent_usage_event to write (created_at is
// MySQL's).
type usageEventRow struct{ requestID, model string }

// insertUsageEvents writes events in one statement.
func insertUsageEvents(tx *gorm.DB, events []usageEventRow) error {
	var b strings.Builder
	b.WriteString("INSERT INTO agent_usage_event (request_id, model_name) VALUES ")
	args := make([]any, 0, 2*len(events))
	for i, e := range events {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?)")
		args = append(args, e.requestID, e.model)
	}
	_, err := execSQL(tx, b.String(), args...)
	return err
}

// IncrUsage adds usages to the per-model hashes agent:usage:{model} (as the Spring
// backend counts them, HINCRBY) and registers the models, in one pipeline.
func (st *UsageStats) IncrUsage(ctx context.Context, us []Usage) error {
	r := st.r
	if len(us) == 0 {
		return nil
	}
	_, err := r.Client(keys.DBAgentPricing).Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, u := range us {
			queueUsage(ctx, p, r.Keys(), u, 1)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: usage counters: %w", err)
	}
	return nil
}

// queueUsage adds u's commands to p: its counts to its model's hash, as
// many requests as u stands for (one usage, or the sum of requests usages
// of its model), and the model to the set of models.
func queueUsage(ctx context.Context, p redis.Pipeliner, kb keys.Builder, u Usage, requests int64) []redis.Cmder {
	key := kb.AgentUsage(u.Model)
	return []redis.Cmder{
		p.HIncrBy(ctx, key, "inputTokens", u.InputTokens),
		p.HIncrBy(ctx, key, "cachedTokens", u.CachedTokens),
		p.HIncrBy(ctx, key, "outputTokens", u.OutputTokens),
		p.HIncrBy(ctx, key, "reasoningTokens", u.ReasoningTokens),
		p.HIncrBy(ctx, key, "requestCount", requests),
		p.HIncrBy(ctx, key, "costMicroFen", u.CostMicroFen),
		p.SAdd(ctx, kb.AgentUsageModels(), u.Model),
	}
}

// UsageStat is a row of agent_usage_stats: one model's usage on one day.
type UsageStat struct {
	ID              uint64    `gorm:"column:id;primaryKey"`
	ModelName       string    `gorm:"column:model_name"`
	StatDate        time.Time `gorm:"column:stat_date;type:date"`
	InputTokens     uint64    `gorm:"column:input_tokens"`
	CachedTokens    uint64    `gorm:"column:cached_tokens"`
	OutputTokens    uint64    `gorm:"column:output_tokens"`
	ReasoningTokens uint64    `gorm:"column:reasoning_tokens"`
	RequestCount    uint64    `gorm:"column:request_count"`
	CostMicroFen    uint64    `gorm:"column:cost_micro_fen"`
	UpdatedAt       time.Time `gorm:"column:updated_at"`
}

// TableName is the table gorm maps UsageStat to.
func (UsageStat) TableName() string { return "agent_usage_stats" }

// UsageKeyMax is the size of agent_usage_event.request_id, in bytes: the
// max of the usage keys (RequestKey, ForeignKey).
const UsageKeyMax = 255

// UsageEvent is a row of agent_usage_event: a usage message already counted.
type UsageEvent struct {
	RequestID string    `gorm:"column:request_id;primaryKey"`
	ModelName string    `gorm:"column:model_name"`
	CreatedAt time.Time `gorm:"column:created_at"`
}

// TableName is the table gorm maps UsageEvent to.
func (UsageEvent) TableName() string { return "agent_usage_event" }

// CountEvents counts the usage events recorded of the requests requestIDs
// (their ids as the API took them: each is looked up by its key).
func (st *UsageStats) CountEvents(ctx context.Context, requestIDs []string) (int64, error) {
	ids := make([]string, len(requestIDs))
	for i, id := range requestIDs {
		ids[i] = RequestKey(id, UsageKeyMax)
	}
	var n int64
	if err := st.db.WithContext(ctx).Model(&UsageEvent{}).Where("request_id IN ?", ids).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: usage events of %d requests: %w", len(requestIDs), err)
	}
	return n, nil
}
