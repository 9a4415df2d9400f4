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
	"github.com/eisland/isle/store"
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

	db, err := app.OpenMySQL(ctx, log, cfg.MySQL)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	rdb, err := app.OpenRedis(ctx, log, cfg.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	ops, err := app.NewOpsServer(cfg.Reconcile.OpsAddr, app.MySQLCheck(sqlDB), app.RedisCheck(rdb.Ping))
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
