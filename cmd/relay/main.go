// Command relay is the outbox relay (doc/outbox.md): it publishes the rows
// of the outbox tables with publisher confirms and marks them published,
// and serves /healthz and /metrics. Several replicas may run at once. With
// OBJECT_REPLICATION_OUTBOX_RELAY_ENABLED=false it publishes nothing; with
// OBJECT_REPLICATION_ENABLED=false it leaves object_outbox alone. On SIGTERM
// it publishes and marks the batches it has claimed, then exits.
package main

import (
	"context"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/relay"
)

func main() { app.Main("relay", run) }

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	svc, cfg, err := app.Start(ctx, args, lookupEnv, app.Binary[config.Relay]{
		Name: "relay", Load: config.LoadRelay,
		Log:   func(c *config.Relay) config.Log { return c.Log },
		Needs: func(c *config.Relay) app.Needs { return app.Needs{MySQL: &c.MySQL, AMQP: &c.AMQP} },
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	log, opened, reg := svc.Log, svc.Opened, svc.Registry

	pub, err := messaging.NewPublisher(messaging.PublisherConfig{
		URL: cfg.AMQP.URL, URLs: cfg.AMQP.URLs, Name: "isle-relay-publisher", Timeout: cfg.AMQP.PublishTimeout, Channels: cfg.AMQP.PublishChannels,
		EnsureOnly: true, // the api declares the topology
	}, opened.Topology, messaging.NewMetrics(reg), log)
	if err != nil {
		return err
	}
	defer pub.Close()
	rc := relay.Config{BatchSize: cfg.Relay.BatchSize, Interval: cfg.Relay.Interval, Lease: cfg.Relay.Lease}
	if !cfg.Relay.ReplicationEnabled {
		rc.Tables = []string{"outbox"}
	}
	r, err := relay.New(opened.DB, opened.Topology, pub, rc, relay.NewMetrics(reg), log)
	if err != nil {
		return err
	}

	ops, err := svc.ServeOps(cfg.Relay.OpsAddr, app.Check{Name: "rabbitmq-publish", Fn: pub.Ping})
	if err != nil {
		return err
	}
	defer ops.Close(log)

	log.InfoContext(ctx, "relay started", "ops", ops.Addr(), "prefix", opened.Topology.Prefix(), "owner", r.Owner(),
		"enabled", cfg.Relay.Enabled, "tables", r.Tables(), "batch", cfg.Relay.BatchSize, "interval", cfg.Relay.Interval,
		"lease", cfg.Relay.Lease)
	if cfg.Relay.Enabled {
		r.Run(ctx) // returns once ctx ends and the batches it claimed are marked
	} else {
		log.WarnContext(ctx, "OBJECT_REPLICATION_OUTBOX_RELAY_ENABLED is false: the relay publishes nothing")
		<-ctx.Done()
	}
	log.Info("relay stopped")
	return nil
}
