// Command relay is the outbox relay (doc/outbox.md): it publishes the rows
// of the outbox tables with publisher confirms and marks them published,
// and serves /healthz and /metrics. Several replicas may run at once. With
// OBJECT_REPLICATION_OUTBOX_RELAY_ENABLED=false it publishes nothing; with
// OBJECT_REPLICATION_ENABLED=false it leaves object_outbox alone. On SIGTERM
// it publishes and marks the batches it has claimed, then exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/internal/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() { app.Main("relay", run) }

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.LoadRelay(lookupEnv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	log := app.NewLogger(os.Stderr, cfg.Log.Level, cfg.Log.Format, "relay")
	deps, err := app.Open(ctx, log, app.Needs{Name: "relay", MySQL: &cfg.MySQL, AMQP: &cfg.AMQP})
	if err != nil {
		return err
	}
	defer deps.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{
		URL: cfg.AMQP.URL, Name: "isle-relay-publisher", Timeout: cfg.AMQP.PublishTimeout, Channels: cfg.AMQP.PublishChannels,
		EnsureOnly: true, // the api declares the topology
	}, deps.Topology, messaging.NewMetrics(reg), log)
	if err != nil {
		return err
	}
	defer pub.Close()
	rc := relay.Config{BatchSize: cfg.Relay.BatchSize, Interval: cfg.Relay.Interval, Lease: cfg.Relay.Lease}
	if !cfg.Relay.ReplicationEnabled {
		rc.Tables = []string{"outbox"}
	}
	r, err := relay.New(deps.DB, deps.Topology, pub, rc, relay.NewMetrics(reg), log)
	if err != nil {
		return err
	}

	checks := append(deps.Checks(), app.Check{Name: "rabbitmq-publish", Fn: pub.Ping})
	ops, err := app.NewOpsServer(cfg.Relay.OpsAddr, checks...)
	if err != nil {
		return err
	}
	defer ops.Close(log)
	if cfg.Log.Pprof {
		ops.Profile()
	}
	ops.Mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))

	log.InfoContext(ctx, "relay started", "ops", ops.Addr(), "prefix", deps.Topology.Prefix(), "owner", r.Owner(),
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
