package handlers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// usageIDMax is the size of agent_usage_event.request_id.
const usageIDMax = store.UsageKeyMax

// UsageCounter counts usages once in MySQL (store.UsageWriter,
// group-committed) and reports of each whether this call counted it, or the
// error of the transaction it was in.
type UsageCounter interface {
	CountUsages(ctx context.Context, us []store.Usage) ([]bool, []error)
}

// UsageHashes adds usages to the Redis per-model hashes
// (store.UsageHashWriter shares one pipeline among concurrent calls).
type UsageHashes interface {
	IncrUsage(ctx context.Context, us []store.Usage) error
}

// UsageRecorder upserts per-model per-day deltas into agent_usage_stats and
// HINCRBYs agent:usage:{model} (doc/money.md). The domain has no retry (the contract's
// usage messages are fire-and-forget): a failure is logged and counted by
// messaging.RetryMiddleware, and the message acked.
type UsageRecorder struct {
	counter UsageCounter
	hashes  UsageHashes
	log     *slog.Logger
	now     func() time.Time
}

// NewUsageRecorder returns the agent-usage-stats consumer.
func NewUsageRecorder(c UsageCounter, h UsageHashes, log *slog.Logger) *UsageRecorder {
	if c == nil || h == nil || log == nil {
		panic("handlers: NewUsageRecorder: nil dependency")
	}
	return &UsageRecorder{counter: c, hashes: h, log: log, now: time.Now}
}

// usageStatsConsumer is the agent-usage-stats consumer of the registry.
func usageStatsConsumer(d Backends, log *slog.Logger) *UsageRecorder {
	hashes := d.UsageHashes
	if hashes == nil {
		hashes = store.NewUsageStats(d.DB, d.Redis)
	}
	return NewUsageRecorder(d.Usage, hashes, log)
}

// Options says that its usages meet in the usage writer and the
// Redis pipeline (Options.GroupCommits).
func (h *UsageRecorder) Options() Options { return Options{GroupCommits: true} }

// Handle counts one usage, once in MySQL, then, when counted now, in the
// Redis hashes; its calls meet those of the other handlers in flight in
// the group-committing writers, which make the batches. The delivery, for
// its message id, comes from ctx.
func (h *UsageRecorder) Handle(ctx context.Context, m topology.AgentUsageStats) error {
	d, _ := messaging.DeliveryFrom(ctx)
	us := []store.Usage{h.usage(d, m, h.now().In(topology.UTC8))}
	counted, errs := h.counter.CountUsages(ctx, us)
	switch {
	case errs[0] != nil:
		return fmt.Errorf("count usage %s: %w", us[0].RequestID, errs[0])
	case !counted[0]:
		return nil
	}
	if err := h.hashes.IncrUsage(ctx, us); err != nil {
		return fmt.Errorf("usage %s counted in MySQL, not in Redis: %w", us[0].RequestID, err)
	}
	return nil
}

// usage is m, brought by d, as the usage to count on day, keyed by its
// request id or, for a message without one, by d as a deduction without
// an id is (billing_deduct.go).
func (h *UsageRecorder) usage(d messaging.Delivery, m topology.AgentUsageStats, day time.Time) store.Usage {
	id, sameBody := store.RequestKey(m.RequestID, usageIDMax), ""
	if m.RequestID == "" {
		id = store.ForeignKey(d.Key(), usageIDMax)
		if d.Redelivered && d.SameBody() != "" {
			sameBody = store.ForeignKey(d.SameBody(), usageIDMax)
		}
	}
	return store.Usage{
		RequestID: id, SameBody: sameBody, Model: m.ModelName, Day: day,
		InputTokens: int64(m.InputTokens), CachedTokens: int64(m.CachedTokens), OutputTokens: int64(m.OutputTokens),
		ReasoningTokens: int64(m.ReasoningTokens), CostMicroFen: m.CostMicroFen,
	}
}
