// Command worker runs Isle's consumers (README): the main consumer of
// each domain that has a handler (agent billing, usage stats), and every
// domain's DLQ consumer, which persists dead messages.
//
//	worker [-handlers all|dlq|agent-billing,agent-usage-stats,email-dlq,...]
//
// Operators scale each kind on its own by running workers with different
// -handlers; per-domain concurrency and prefetch come from the environment.
package main

import (
	"context"
	"flag"
	"log/slog"
	"slices"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
)

func main() { app.Main("worker", run) }

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	handlerSpec := fs.String("handlers", "all", "handlers to run, comma-separated: all, dlq (every DLQ consumer), domain names, <domain>-dlq")
	svc, cfg, err := app.Start(ctx, args, lookupEnv, app.Binary[config.Worker]{
		Name: "worker", Flags: fs, Load: config.LoadWorker, Warn: warn,
		Log: func(c *config.Worker) config.Log { return c.Log },
		Needs: func(c *config.Worker) app.Needs {
			return app.Needs{MySQL: &c.MySQL, Redis: &c.Redis, AMQP: &c.AMQP, Payments: &c.Payments}
		},
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	log, opened, reg := svc.Log, svc.Opened, svc.Registry

	metrics := messaging.NewMetrics(reg)
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{
		URL: cfg.AMQP.URL, URLs: cfg.AMQP.URLs, Name: "isle-worker-publisher", Timeout: cfg.AMQP.PublishTimeout, Channels: cfg.AMQP.PublishChannels,
		EnsureOnly: true, // the api declares the topology
	}, opened.Topology, metrics, log)
	if err != nil {
		return err
	}
	defer pub.Close()
	w := newWriters(opened, reg)
	defer w.close() // after the router stopped: handlers in flight wait on it
	buckets, err := openBuckets(cfg.Objects)
	if err != nil {
		return err
	}
	mailer, err := app.OpenMailer(cfg.Mail)
	if err != nil {
		return err
	}
	selected, err := selectRoutes(routes(opened, w, buckets, mailer, cfg.Worker, log), *handlerSpec)
	if err != nil {
		return err
	}
	noGatewayKeys(ctx, log, cfg.Payments, selected)
	var sub message.Subscriber
	if cfg.Worker.Subscriber == config.SubscriberWatermillAMQP { // for islectl bench only (subscriber.go)
		sub, err = newWatermillAMQPSubscriber(cfg.AMQP.URL, cfg.Worker.Prefetch, topics(selected), log)
	} else {
		sub, err = messaging.NewSubscriber(subscriberConfig(cfg.AMQP, cfg.Worker, selected), log)
	}
	if err != nil {
		return err
	}
	defer sub.Close() // waits for the acks of what was handled to go out
	router, err := newRouter(selected, sub, pub, metrics, cfg.Worker, log)
	if err != nil {
		return err
	}
	names := make([]string, len(selected))
	for i, r := range selected {
		names[i] = r.Name
	}
	ops, err := svc.ServeOps(cfg.Worker.OpsAddr, app.Check{Name: "rabbitmq-publish", Fn: pub.Ping})
	if err != nil {
		return err
	}
	defer ops.Close(log)

	go func() {
		<-ctx.Done()
		log.Info("draining: no new deliveries; waiting for handlers in flight", "timeout", cfg.Worker.ShutdownTimeout)
		_ = router.Close()
	}()
	go func() {
		select {
		case <-router.Running():
			log.InfoContext(ctx, "worker started", "ops", ops.Addr(), "prefix", opened.Topology.Prefix(),
				"handlers", strings.Join(names, ","), "prefetch", cfg.Worker.Prefetch, "subscriber", cfg.Worker.Subscriber)
		case <-ctx.Done():
		}
	}()
	if err := router.Run(ctx); err != nil {
		return err
	}
	_ = sub.Close()
	log.Info("worker stopped")
	return nil
}

// warn logs what the configuration deserves a warning for: test gateway
// keys (only with ISLE_DEV=1: the configuration refuses them otherwise).
func warn(ctx context.Context, log *slog.Logger, cfg *config.Worker) {
	if cfg.Payments.TestKeys {
		log.WarnContext(ctx, "ISLE_DEV=1 and local TEST payment gateway keys (islectl pay keys): whoever has their private halves can make this worker grant a payment; never in production")
	}
}

// noGatewayKeys logs, for a worker that runs the payment-notify consumer,
// the gateways without keys, whose paid notifications without an amount
// (the Spring producer's) it cannot verify and refuses.
func noGatewayKeys(ctx context.Context, log *slog.Logger, p config.Payments, selected []route) {
	notify := func(r route) bool { return r.Name == "payment-notify" } // its consumer's -handlers name
	if !slices.ContainsFunc(selected, notify) {
		return
	}
	var none []string
	if !p.AlipayConfigured() {
		none = append(none, "PAYMENT_ALIPAY_*")
	}
	if !p.WechatConfigured() {
		none = append(none, "PAYMENT_WECHAT_*")
	}
	if len(none) > 0 {
		log.InfoContext(ctx, "payment gateways without keys: a paid notification of theirs without its amount is refused (doc/payments.md)",
			"unset", strings.Join(none, ", "))
	}
}
