// Command reconcile runs Isle's cron jobs under a Redis leader lease:
// balance sync, replication backfill and DLQ replay (SPEC section 4.6).
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
		fmt.Fprintln(os.Stderr, "reconcile:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.LoadReconcile(getenv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	log := app.NewLogger(os.Stderr, cfg.Log.Level, cfg.Log.Format, "reconcile")
	deps, err := app.Open(ctx, log, app.Needs{Name: "reconcile", MySQL: &cfg.MySQL, Redis: &cfg.Redis})
	if err != nil {
		return err
	}
	defer deps.Close()
	ops, err := app.NewOpsServer(cfg.Reconcile.OpsAddr, deps.Checks()...)
	if err != nil {
		return err
	}
	defer ops.Close(log)

	log.InfoContext(ctx, "reconcile started", "ops", ops.Addr(),
		"backfill", cfg.Reconcile.BackfillEnabled, "dlq_replay", cfg.Reconcile.ReplayEnabled)
	<-ctx.Done()
	log.Info("reconcile stopped")
	return nil
}
