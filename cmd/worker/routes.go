package main

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/prometheus/client_golang/prometheus"
)

// writers are the group-committing writers the consumers share — MySQL
// transactions and Redis pipelines — with the size of each transaction or
// pipeline in isle_batch_size.
type writers struct {
	ledger      *store.LedgerWriter
	usage       *store.UsageWriter
	settle      *store.SettleWriter
	usageHashes *store.UsageHashWriter
}

func newWriters(opened *app.Opened, reg prometheus.Registerer) *writers {
	sizes := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "isle_batch_size",
		Help:    "Items per MySQL transaction or Redis pipeline of the group-committing consumers, by batcher.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100},
	}, []string{"batcher"})
	reg.MustRegister(sizes)
	observe := func(batcher string, n int) { sizes.WithLabelValues(batcher).Observe(float64(n)) }
	return &writers{ledger: store.NewLedgerWriter(opened.DB, observe), usage: store.NewUsageWriter(opened.DB, observe),
		settle: store.NewSettleWriter(opened.Redis, observe), usageHashes: store.NewUsageHashWriter(opened.Redis, observe)}
}

// close finishes what the writers hold; call it after the consumer stopped.
func (w *writers) close() {
	w.ledger.Close()
	w.usage.Close()
	w.settle.Close()
	w.usageHashes.Close()
}

// route is one handler of the worker's Router: a consumer of the registry
// (handlers.Routes), the queue it consumes, and its channels there.
type route struct {
	handlers.Route
	queue string
	tune  messaging.TopicConfig
}

// routes returns every route the worker can run, by handler name: the main
// consumer of each domain the registry has, on WORKER_CONCURRENCY channels
// of its queue, and each domain's DLQ consumer ("<domain>-dlq") on one.
// opened.Payments verifies the callbacks of paid notifications without an
// amount. The group-committing consumers' channels hold at least one
// WORKER_BATCH each: with their channels, a few commits' worth in flight,
// one committing while the next fill (each delivery in flight is a
// goroutine and its message in memory: more only costs memory).
func routes(opened *app.Opened, w *writers, buckets handlers.Buckets, mailer mail.Mailer, cfg config.WorkerSection, log *slog.Logger) map[string]route {
	hd := handlers.Backends{DB: opened.DB, Redis: opened.Redis, Ledger: w.ledger, Usage: w.usage, Settler: w.settle, UsageHashes: w.usageHashes, Log: log,
		Buckets:     buckets,
		CopyTimeout: cfg.SourceFetchTimeout, Mailer: mailer, Payments: opened.Payments}
	out := map[string]route{}
	for _, r := range handlers.Routes(opened.Topology, hd) {
		if r.DLQ {
			out[r.Name] = route{Route: r, queue: r.Domain.DLQ, tune: messaging.TopicConfig{Channels: 1}}
			continue
		}
		rt := route{Route: r, queue: r.Domain.Queue, tune: messaging.TopicConfig{Channels: cfg.Concurrency[r.Name]}}
		if r.GroupCommits {
			rt.tune.Prefetch = max(cfg.Prefetch, cfg.Batch)
		}
		out[r.Name] = rt
	}
	return out
}

// selectRoutes picks the routes -handlers names: "all", "dlq" (every DLQ
// consumer), domain names and "<domain>-dlq".
func selectRoutes(available map[string]route, spec string) ([]route, error) {
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
	out := make([]route, len(picked))
	for i, n := range picked {
		out[i] = available[n]
	}
	return out, nil
}

// openBuckets opens the three object stores the worker's consumers use.
func openBuckets(o config.Objects) (handlers.Buckets, error) {
	maxSize := o.MaxBytes()
	var (
		b   handlers.Buckets
		err error
	)
	if b.Source, err = app.OpenStore("source", o.Source, maxSize); err != nil {
		return handlers.Buckets{}, err
	}
	if b.Target, err = app.OpenStore("replica", o.Target, maxSize); err != nil {
		return handlers.Buckets{}, err
	}
	if b.Identity, err = app.OpenStore("identity material", o.Identity, maxSize); err != nil {
		return handlers.Buckets{}, err
	}
	return b, nil
}
