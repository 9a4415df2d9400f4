package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
)

// batchers group the MySQL writes of concurrent handlers into shared
// transactions (group commit).
type batchers struct {
	ledger  *store.Batcher[store.Debit, store.DebitResult]
	settled *store.Batcher[store.EntryKey, struct{}]
	usage   *store.Batcher[store.Usage, bool]
}

// ledger is what the deduct consumer needs, both halves group-committed.
type ledger struct{ b *batchers }

func (l ledger) Do(ctx context.Context, d store.Debit) (store.DebitResult, error) {
	return l.b.ledger.Do(ctx, d)
}

func (l ledger) MarkSettled(ctx context.Context, entries ...store.EntryKey) error {
	for _, e := range entries {
		if _, err := l.b.settled.Do(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

func newBatchers(deps *app.Deps, reg prometheus.Registerer) *batchers {
	const size = 100
	sizes := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "isle_batch_size",
		Help:    "Items per MySQL transaction of the group-committing consumers, by batcher.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100},
	}, []string{"batcher"})
	reg.MustRegister(sizes)
	b := &batchers{
		ledger: store.NewBatcher(size, func(ctx context.Context, ds []store.Debit) ([]store.DebitResult, error) {
			return store.ApplyDebits(ctx, deps.DB, ds)
		}),
		settled: store.NewBatcher(size, func(ctx context.Context, es []store.EntryKey) ([]struct{}, error) {
			return make([]struct{}, len(es)), store.MarkSettled(ctx, deps.DB, es...)
		}),
		usage: store.NewBatcher(size, func(ctx context.Context, us []store.Usage) ([]bool, error) {
			return store.ApplyUsage(ctx, deps.DB, us)
		}),
	}
	b.ledger.Observe = func(n int) { sizes.WithLabelValues("ledger").Observe(float64(n)) }
	b.usage.Observe = func(n int) { sizes.WithLabelValues("usage").Observe(float64(n)) }
	return b
}

// close finishes what the batchers hold; call it after the consumer stopped.
func (b *batchers) close() {
	b.ledger.Close()
	b.settled.Close()
	b.usage.Close()
}

// routes returns every route the worker can run, by handler name: the main
// consumer of each domain whose handler exists, and each domain's DLQ
// consumer ("<domain>-dlq").
func routes(deps *app.Deps, flow *messaging.Flow, b *batchers, cfg config.WorkerSection, log *slog.Logger) map[string]messaging.Route {
	out := map[string]messaging.Route{}
	main := func(domain string, h messaging.HandlerFunc) {
		d, _ := deps.Topology.Domain(domain)
		out[domain] = messaging.Route{Name: domain, Queue: d.Queue, Concurrency: cfg.Concurrency[domain], Handle: flow.Main(d, h)}
	}
	main(topology.DomainAgentBilling, messaging.Typed(handlers.NewBillingDeduct(ledger{b}, deps.Redis, log.With("handler", "agent-billing")).Handle))
	main(topology.DomainAgentUsageStats, messaging.Typed(handlers.NewUsageStats(b.usage, deps.Redis, log.With("handler", "agent-usage-stats")).Handle))
	for _, d := range deps.Topology.Domains() {
		if d.HasRetry() {
			name := d.Name + "-dlq"
			out[name] = messaging.Route{
				Name: name, Queue: d.DLQ, Concurrency: 1,
				Handle: flow.DLQ(d, handlers.NewDeadLetters(deps.DB, d, log.With("handler", name)).Handle),
			}
		}
	}
	return out
}

// selectRoutes picks the routes -handlers names: "all", "dlq" (every DLQ
// consumer), domain names and "<domain>-dlq".
func selectRoutes(available map[string]messaging.Route, spec string) ([]messaging.Route, error) {
	names := make([]string, 0, len(available))
	for n := range available {
		names = append(names, n)
	}
	sort.Strings(names)
	var picked []string
	for _, want := range strings.Split(spec, ",") {
		switch want = strings.TrimSpace(want); want {
		case "":
		case "all":
			picked = append(picked, names...)
		case "dlq":
			for _, n := range names {
				if strings.HasSuffix(n, "-dlq") {
					picked = append(picked, n)
				}
			}
		default:
			if _, ok := available[want]; !ok {
				return nil, fmt.Errorf("-handlers: no handler %q; available: all, dlq, %s", want, strings.Join(names, ", "))
			}
			picked = append(picked, want)
		}
	}
	slices.Sort(picked)
	picked = slices.Compact(picked)
	if len(picked) == 0 {
		return nil, fmt.Errorf("-handlers %q selects nothing", spec)
	}
	out := make([]messaging.Route, len(picked))
	for i, n := range picked {
		out[i] = available[n]
	}
	return out, nil
}
