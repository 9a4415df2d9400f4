package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The worker's Router has, for every domain of the contract, exactly one
// handler of its main queue (or the domain is in handlers.NotConsumed, with
// its reason, and has none) and exactly one of its DLQ; no handler consumes
// a queue the topology lacks.
func TestRouterHandlesEveryQueueOnce(t *testing.T) {
	cfg, tp, available := defaultRoutes(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	selected, err := selectRoutes(available, "all")
	require.NoError(t, err)
	sub, err := messaging.NewSubscriber(messaging.SubscriberConfig{URL: storetest.AMQPURL()}, log)
	require.NoError(t, err)
	router, err := newRouter(selected, sub, nil, messaging.NewMetrics(prometheus.NewRegistry()), cfg.Worker, log)
	require.NoError(t, err)

	queueOf := map[string]string{}
	for _, rt := range selected {
		queueOf[rt.Name] = rt.queue
	}
	handled := map[string]int{}
	for name := range router.Handlers() {
		q, ok := queueOf[name]
		require.True(t, ok, "handler %s is not a route", name)
		handled[q]++
	}
	known := map[string]bool{}
	for _, d := range tp.Domains() {
		if d.Queue != "" {
			known[d.Queue] = true
			if why, skipped := handlers.NotConsumed[d.Name]; skipped {
				require.NotEmpty(t, why, d.Name)
				require.Zero(t, handled[d.Queue], "%s is in NotConsumed yet has a handler", d.Name)
			} else {
				require.Equal(t, 1, handled[d.Queue], "handlers of %s's main queue %s", d.Name, d.Queue)
			}
		}
		if d.DLQ != "" {
			known[d.DLQ] = true
			require.Equal(t, 1, handled[d.DLQ], "handlers of %s's DLQ %s", d.Name, d.DLQ)
		}
	}
	for q := range handled {
		require.True(t, known[q], "a handler consumes %s, which the topology lacks", q)
	}
}

// defaultRoutes is the worker's configuration from an empty environment,
// its topology and every route it can run.
func defaultRoutes(t *testing.T) (config.Worker, *topology.Topology, map[string]route) {
	t.Helper()
	cfg, err := config.LoadWorker(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	opened := &app.Opened{DB: storetest.MySQL(t), Redis: storetest.Redis(t), Topology: tp}
	w := newWriters(opened, prometheus.NewRegistry())
	t.Cleanup(w.close)
	buckets := handlers.Buckets{Source: fileStore(t), Target: fileStore(t), Identity: fileStore(t)}
	mailer, err := mail.Open("file://"+t.TempDir()+"?from=no-reply%40isle.test", mail.Options{})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg, tp, routes(opened, w, buckets, mailer, cfg.Worker, log)
}

// A group-committing consumer's channels each hold one WORKER_BATCH
// (WORKER_PREFETCH if larger): with its channels, a few commits' worth in
// flight, one committing while the next fill, and no more (each delivery
// in flight is a goroutine and its message in memory); the others hold
// WORKER_PREFETCH.
func TestGroupCommittingConsumersHoldABatchPerChannel(t *testing.T) {
	cfg, _, available := defaultRoutes(t)
	batching := 0
	for name, rt := range available {
		switch {
		case rt.DLQ:
			require.Equal(t, 1, rt.tune.Channels, name)
		case rt.GroupCommits:
			batching++
			require.Equal(t, max(cfg.Worker.Prefetch, cfg.Worker.Batch), rt.tune.Prefetch, name)
		default:
			require.Zero(t, rt.tune.Prefetch, "%s takes WORKER_PREFETCH", name)
		}
	}
	require.Equal(t, 2, batching, "agent-billing and agent-usage-stats")
}

func fileStore(t *testing.T) objstore.Store {
	t.Helper()

	s, err := objstore.Open("file://"+t.TempDir(), objstore.Options{})
	require.NoError(t, err)
	return s
}

// The worker's subscriber hands out what its channels hold when it stops,
// for every queue: the consumers that key a message without an id by its
// delivery would take a delivery given back, which comes again flagged as
// redelivered, for one they may have applied.
func TestWorkerSubscriberFinishesWhatItHolds(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWorker(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	sc := subscriberConfig(cfg.AMQP, cfg.Worker, []route{{queue: "q"}})
	require.True(t, sc.FinishHeld)
	require.Equal(t, cfg.Worker.ShutdownTimeout, sc.ShutdownTimeout)
	require.Contains(t, sc.Topics, "q")
}
