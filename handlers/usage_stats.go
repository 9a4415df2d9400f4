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

// usageIDMax is the size of agent_usage_event.request_id.
const usageIDMax = 255

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
// HINCRBYs agent:usage:{model} (doc/money.md). The domain has no retry (the
// 002: fire-and-forget): a failure is logged and counted by
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
func usageStatsConsumer(d Deps, log *slog.Logger) messaging.HandlerFunc {
	hashes := d.UsageHashes
	if hashes == nil {
		hashes = store.NewUsageStats(d.DB, d.Redis)
	}
	return messaging.Typed(NewUsageRecorder(d.Usage, hashes, log).Handle)
}

// Handle counts one usage (HandleBatch of one); the delivery, for its
// message id, comes from ctx.
func (h *UsageRecorder) Handle(ctx context.Context, m topology.AgentUsageStats) error {
	d, _ := messaging.DeliveryFrom(ctx)
	return h.HandleBatch(ctx, []UsageItem{{Delivery: d, Msg: m}})[0]
}

// UsageItem is one usage of a HandleBatch: its record, and the delivery
// that brought it (its key, its Redelivered flag).
type UsageItem struct {
	Delivery messaging.Delivery
	Msg      topology.AgentUsageStats
}

// HandleBatch counts a batch of usages, on the day (UTC+8) they are
// handled: once each in MySQL (shared transactions), then the ones counted
// now in the Redis hashes, in one pipeline (shared too).
func (h *UsageRecorder) HandleBatch(ctx context.Context, items []UsageItem) []error {
	day := h.now().In(topology.UTC8)
	us := make([]store.Usage, len(items))
	for i, it := range items {
		m := it.Msg
		id, sameBody := m.RequestID, ""
		if id == "" {
			// Keyed as a deduction without an id is (billing_deduct.go).
			id = store.ForeignKey(it.Delivery.Key(), usageIDMax)
			if it.Delivery.Redelivered && it.Delivery.SameBody() != "" {
				sameBody = store.ForeignKey(it.Delivery.SameBody(), usageIDMax)
			}
		}
		us[i] = store.Usage{
			RequestID: id, SameBody: sameBody, Model: m.ModelName, Day: day,
			InputTokens: int64(m.InputTokens), CachedTokens: int64(m.CachedTokens), OutputTokens: int64(m.OutputTokens),
			ReasoningTokens: int64(m.ReasoningTokens), CostMicroFen: m.CostMicroFen,
		}
	}
	counted, countErrs := h.counter.CountUsages(ctx, us)
	errs := make([]error, len(items))
	var incr []store.Usage
	var at []int
	for i, err := range countErrs {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("count usage %s: %w", us[i].RequestID, err)
		case counted[i]:
			incr = append(incr, us[i])
			at = append(at, i)
		}
	}
	if len(incr) == 0 {
		return errs
	}
	if err := h.hashes.IncrUsage(ctx, incr); err != nil {
		for k, i := range at {
			errs[i] = fmt.Errorf("usage %s counted in MySQL, not in Redis: %w", incr[k].RequestID, err)
		}
	}
	return errs
}
