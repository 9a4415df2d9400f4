// Command worker runs Isle's consumers: one per domain of the wire contract,
// and the DLQ consumers that persist dead messages (SPEC section 1).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.LoadWorker(getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	log := app.NewLogger(os.Stderr, cfg.Log.Level, cfg.Log.Format, "worker")
	deps, err := app.Open(ctx, log, app.Needs{Name: "worker", MySQL: &cfg.MySQL, Redis: &cfg.Redis, AMQP: &cfg.AMQP})
	if err != nil {
		return err
	}
	defer deps.Close()
	ops, err := app.NewOpsServer(cfg.Worker.OpsAddr, deps.Checks()...)
	if err != nil {
		return err
	}
	defer ops.Close(log)

	log.InfoContext(ctx, "worker started", "ops", ops.Addr(), "prefix", deps.Topology.Prefix(), "domains", len(deps.Topology.Domains()))
	<-ctx.Done()
	log.Info("worker stopped")
	return nil
}
