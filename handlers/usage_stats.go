package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// UsageCounter counts usages once in MySQL (store.UsageWriter,
// group-committed) and reports whether this call counted it.
type UsageCounter interface {
	CountUsage(ctx context.Context, u store.Usage) (bool, error)
}

// UsageHashes adds usages to the Redis per-model hashes.
type UsageHashes interface {
	IncrUsage(ctx context.Context, us []store.Usage) error
}

// UsageStats upserts per-model per-day deltas into agent_usage_stats and
// HINCRBYs agent:usage:{model} (doc/money.md). The domain has no retry (the
// 002: fire-and-forget): a failure is logged and counted by the flow.
type UsageStats struct {
	counter UsageCounter
	hashes  UsageHashes
	log     *slog.Logger
	now     func() time.Time
}

// NewUsageStats returns the agent-usage-stats consumer.
func NewUsageStats(c UsageCounter, h UsageHashes, log *slog.Logger) *UsageStats {
	if c == nil || h == nil || log == nil {
		panic("handlers: NewUsageStats: nil dependency")
	}
	return &UsageStats{counter: c, hashes: h, log: log, now: time.Now}
}

// usageStatsConsumer is the agent-usage-stats consumer of the registry.
func usageStatsConsumer(d Deps, log *slog.Logger) messaging.HandlerFunc {
	return messaging.Typed(NewUsageStats(d.Usage, store.NewUsageStats(d.DB, d.Redis), log).Handle)
}

// Handle counts one usage, on the day (UTC+8) it is handled.
func (h *UsageStats) Handle(ctx context.Context, m topology.AgentUsageStats) error {
	id := m.RequestID
	if id == "" {
		d, _ := messaging.DeliveryFrom(ctx)
		id = fitKey("msg:"+d.MessageID, 255)
	}
	u := store.Usage{
		RequestID: id, Model: m.ModelName, Day: h.now().In(topology.UTC8),
		InputTokens: int64(m.InputTokens), CachedTokens: int64(m.CachedTokens), OutputTokens: int64(m.OutputTokens),
		ReasoningTokens: int64(m.ReasoningTokens), CostMicroFen: m.CostMicroFen,
	}
	counted, err := h.counter.CountUsage(ctx, u)
	if err != nil {
		return fmt.Errorf("count usage %s: %w", id, err)
	}
	if !counted {
		return nil
	}
	if err := h.hashes.IncrUsage(ctx, []store.Usage{u}); err != nil {
		return fmt.Errorf("usage %s counted in MySQL, not in Redis: %w", id, err)
	}
	return nil
}
