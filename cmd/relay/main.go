// Command relay is the outbox relay's process (doc/outbox.md describes the
// outbox it drains): it loads its configuration, connects to MySQL and
// RabbitMQ and serves /healthz; it publishes no outbox rows, and says so in
// its log. Several replicas may run at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
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
	ops, err := app.NewOpsServer(cfg.Relay.OpsAddr, deps.Checks()...)
	if err != nil {
		return err
	}
	defer ops.Close(log)
	if cfg.Log.Pprof {
		ops.Profile()
	}

	log.InfoContext(ctx, "relay started", "ops", ops.Addr(), "prefix", deps.Topology.Prefix(),
		"enabled", cfg.Relay.Enabled, "batch", cfg.Relay.BatchSize, "interval", cfg.Relay.Interval)
	log.WarnContext(ctx, "this build has no outbox publisher yet: the relay publishes nothing")
	<-ctx.Done()
	log.Info("relay stopped")
	return nil
}
