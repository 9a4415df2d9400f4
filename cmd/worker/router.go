package main

import (
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
)

// newRouter builds the worker's watermill Router: one handler per route,
// consuming the route's queue through sub, behind its domain's middleware
// (messaging.MainChain for a main queue: correlation, metrics, retry
// copies and the DLQ, recovery, timeout; messaging.DeadLetterChain for a
// DLQ). The Router handles each message in its own goroutine, so a route
// has as many in flight as its channels' prefetch; it waits up to
// WORKER_SHUTDOWN_TIMEOUT for them when it closes.
func newRouter(selected []route, sub message.Subscriber, pub *messaging.Publisher, metrics *messaging.Metrics,
	cfg config.WorkerSection, log *slog.Logger) (*message.Router, error) {
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.ShutdownTimeout}, routerLogger(log))
	if err != nil {
		return nil, err
	}
	chainCfg := messaging.ChainConfig{HandlerTimeout: cfg.HandlerTimeout}
	for _, rt := range selected {
		chain := messaging.MainChain(rt.Domain, pub, metrics, chainCfg, log)
		if rt.DLQ {
			chain = messaging.DeadLetterChain(rt.Domain, metrics, chainCfg, log)
		}
		r.AddConsumerHandler(rt.Name, rt.queue, sub, messaging.RouterHandler(rt.Handle)).AddMiddleware(chain...)
	}
	return r, nil
}

// subscriberConfig is the configuration of the worker's subscriber of the
// selected routes. Every route hands out what its channels hold when the
// worker stops (FinishHeld): given back, a delivery comes again flagged as
// redelivered, which the consumers that key a message without an id by its
// delivery (agent-billing, agent-usage-stats) must take for one they may
// have applied (handlers.Consumer).
func subscriberConfig(amqp config.AMQP, w config.WorkerSection, selected []route) messaging.SubscriberConfig {
	return messaging.SubscriberConfig{
		URL: amqp.URL, URLs: amqp.URLs, Name: "isle-worker", Prefetch: w.Prefetch, Topics: topics(selected),
		ShutdownTimeout: w.ShutdownTimeout, FinishHeld: true,
	}
}

// topics are the subscriber's channels per queue of the selected routes.
func topics(selected []route) map[string]messaging.TopicConfig {
	out := make(map[string]messaging.TopicConfig, len(selected))
	for _, rt := range selected {
		out[rt.queue] = rt.tune
	}
	return out
}

// routerLogger gives the Router's own lines to log one level down: its
// start and stop lines are debug detail, and a handler's error it reports
// was logged by the middleware already (the failures that reach the Router
// are nacks: a copy that could not be published, a shutdown).
func routerLogger(log *slog.Logger) watermill.LoggerAdapter {
	return messaging.WatermillLogger(log.With("component", "router"), map[slog.Level]slog.Level{
		slog.LevelInfo:  slog.LevelDebug,
		slog.LevelError: slog.LevelWarn,
	})
}
