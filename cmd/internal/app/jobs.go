package app

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Backends are the open stores and clients the reconciler's jobs are built
// from: the reconciler builds them to schedule them or run one (-once), the
// operator console to run one now.
type Backends struct {
	DB       *gorm.DB
	Redis    *store.Redis
	Topology *topology.Topology
	// Admin is the broker's management API: balance-sync asks it whether a
	// billing message may still arrive. NewConsole makes one when it is nil.
	Admin     *rabbitadmin.Client
	Publisher *messaging.Publisher // nil: dlq-replay and replication-backfill are left out, and the console replays nothing
	Metrics   *reconcile.Metrics
	Log       *slog.Logger
}

// JobNames are the names of every job, sorted.
var JobNames = []string{"balance-sync", "dlq-replay", "outbox-purge", "replication-backfill"}

// needsPublisher are the jobs that publish.
var needsPublisher = []string{"dlq-replay", "replication-backfill"}

// JobNeedsPublisher reports whether a job publishes (and so needs RabbitMQ).
func JobNeedsPublisher(name string) bool { return slices.Contains(needsPublisher, name) }

// Jobs builds every job d allows, by name.
func Jobs(d Backends, cfg config.ReconcileSection) (map[string]reconcile.Job, error) {
	inflight, err := reconcile.NewBillingInFlight(d.Topology, d.Admin, d.DB)
	if err != nil {
		return nil, err
	}
	dead := dlq.NewStore(d.DB, d.Topology)
	jobs := map[string]reconcile.Job{
		"balance-sync": reconcile.NewBalanceSync(d.DB, d.Redis, cfg.BalanceSync, inflight, d.Metrics, d.Log),
		"outbox-purge": reconcile.NewOutboxPurge(d.DB, cfg.OutboxPurge, d.Metrics, d.Log),
	}
	if d.Publisher != nil {
		jobs["dlq-replay"] = reconcile.NewDLQReplay(dead, d.Publisher, topology.DomainObjectReplication, cfg.ReplayBatchSize)
		dom, _ := d.Topology.Domain(topology.DomainObjectReplication) // in every topology: a test holds the table
		jobs["replication-backfill"] = reconcile.NewReplicationBackfill(d.DB, dom, d.Publisher, cfg.Backfill, d.Metrics, d.Log)
	}
	if names := slices.Sorted(maps.Keys(jobs)); !slices.Equal(names, JobNames) && d.Publisher != nil {
		return nil, fmt.Errorf("app: jobs %v, want %v", names, JobNames) // a wiring bug
	}
	return jobs, nil
}

// Schedules are the cron specs cfg runs the jobs on, by name; a job that is
// not scheduled (switched off, or run only with -once) is absent.
func Schedules(cfg config.ReconcileSection) map[string]string {
	out := map[string]string{}
	if cfg.BalanceSyncSchedule != "off" {
		out["balance-sync"] = cfg.BalanceSyncSchedule
	}
	if cfg.OutboxPurgeSchedule != "off" {
		out["outbox-purge"] = cfg.OutboxPurgeSchedule
	}
	if cfg.ReplayEnabled {
		out["dlq-replay"] = "@every " + cfg.ReplayInterval.String()
	}
	if cfg.BackfillEnabled {
		out["replication-backfill"] = "@every " + cfg.BackfillInterval.String()
	}
	return out
}

// ProcessName names this process in job_run.owner: binary@host pid N.
func ProcessName(binary string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s@%s pid %d", binary, host, os.Getpid())
}
