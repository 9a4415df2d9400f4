// Command reconcile runs Isle's cron jobs under a Redis leader lease:
// balance sync (doc/money.md), DLQ replay (doc/messaging.md), the purge
// of published outbox rows and the replication backfill (doc/outbox.md).
//
//	reconcile               schedule the jobs; any number of replicas run each once
//	reconcile -once JOB     run one job now, print its result and exit (for external schedulers)
//
// Jobs: balance-sync, dlq-replay, outbox-purge, replication-backfill.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/dlq"
	"github.com/eisland/isle/internal/lease"
	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/internal/rabbitadmin"
	"github.com/eisland/isle/internal/reconcile"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	app.Main("reconcile", func(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
		return run(ctx, args, lookupEnv, os.Stdout)
	})
}

// services are what the jobs are built from. pub is nil unless dlq-replay
// or replication-backfill may run: only then does the reconciler connect to
// RabbitMQ (and declare the topology: deps.Topology).
type services struct {
	deps     *app.Deps
	pub      *messaging.Publisher
	inflight reconcile.InFlight // whether a deduction message may still arrive (balance-sync)
	cfg      config.ReconcileSection
	metrics  *reconcile.Metrics
	log      *slog.Logger
}

// jobs builds each job, by the name -once takes.
var jobs = map[string]func(s services) reconcile.Job{
	"balance-sync": func(s services) reconcile.Job {
		return reconcile.NewBalanceSync(s.deps.DB, s.deps.Redis, s.cfg.BalanceSync, s.inflight, s.metrics, s.log)
	},
	"dlq-replay": func(s services) reconcile.Job {
		return reconcile.NewDLQReplay(dlq.NewStore(s.deps.DB, s.deps.Topology), s.pub, topology.DomainObjectReplication, s.cfg.ReplayBatchSize)
	},
	"outbox-purge": func(s services) reconcile.Job {
		return reconcile.NewOutboxPurge(s.deps.DB, s.cfg.OutboxPurge, s.metrics, s.log)
	},
	"replication-backfill": func(s services) reconcile.Job {
		dom, _ := s.deps.Topology.Domain(topology.DomainObjectReplication) // in every topology: a test holds the table
		return reconcile.NewReplicationBackfill(s.deps.DB, dom, s.pub, s.cfg.Backfill, s.metrics, s.log)
	},
}

// jobNames are the jobs' names, sorted, for -once and its usage.
var jobNames = slices.Sorted(maps.Keys(jobs))

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	once := fs.String("once", "", "run one job now and exit: "+strings.Join(jobNames, ", "))
	asJSON := fs.Bool("json", false, "with -once: print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *once != "" && !slices.Contains(jobNames, *once) {
		return fmt.Errorf("-once %q: want one of %s", *once, strings.Join(jobNames, ", "))
	}
	cfg, err := config.LoadReconcile(lookupEnv)
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	log := app.NewLogger(os.Stderr, cfg.Log.Level, cfg.Log.Format, "reconcile")
	rc := cfg.Reconcile
	needAMQP := rc.ReplayEnabled || rc.BackfillEnabled || *once == "dlq-replay" || *once == "replication-backfill"
	needs := app.Needs{Name: "reconcile", MySQL: &cfg.MySQL, Redis: &cfg.Redis}
	if needAMQP {
		needs.AMQP = &cfg.AMQP
	}
	deps, err := app.Open(ctx, log, needs)
	if err != nil {
		return err
	}
	defer deps.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := reconcile.NewMetrics(reg)
	// balance-sync asks the broker's management API how many billing
	// messages are queued or unacknowledged before it adjusts a balance.
	admin, err := rabbitadmin.New(cfg.AMQP.ManagementURL, cfg.AMQP.VHost)
	if err != nil {
		return err
	}
	tp := deps.Topology // declared only when the reconciler publishes
	if tp == nil {
		if tp, err = topology.New(cfg.AMQP.Topology); err != nil {
			return err
		}
	}
	inflight, err := reconcile.NewBillingInFlight(tp, admin, dlq.NewStore(deps.DB, tp))
	if err != nil {
		return err
	}
	svc := services{deps: deps, inflight: inflight, cfg: rc, metrics: metrics, log: log}
	if needAMQP {
		pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: cfg.AMQP.URL, Name: "isle-reconcile", Timeout: cfg.AMQP.PublishTimeout, Channels: 4},
			deps.Topology, messaging.NewMetrics(reg), log)
		if err != nil {
			return err
		}
		defer pub.Close()
		svc.pub = pub
	}

	if *once != "" {
		res, err := reconcile.RunJob(ctx, deps.Redis, jobs[*once](svc), metrics, log)
		if res != nil {
			if *asJSON {
				_ = json.NewEncoder(stdout).Encode(map[string]any{"job": *once, "result": attrMap(res.LogValue())})
			} else {
				fmt.Fprintf(stdout, "%s: %s\n", *once, res)
			}
		}
		return err
	}

	var schedules []reconcile.Schedule
	if rc.BalanceSyncSchedule != "off" {
		schedules = append(schedules, reconcile.Schedule{Spec: rc.BalanceSyncSchedule, Job: jobs["balance-sync"](svc)})
	}
	if rc.OutboxPurgeSchedule != "off" {
		schedules = append(schedules, reconcile.Schedule{Spec: rc.OutboxPurgeSchedule, Job: jobs["outbox-purge"](svc)})
	}
	if rc.ReplayEnabled {
		schedules = append(schedules, reconcile.Schedule{Spec: "@every " + rc.ReplayInterval.String(), Job: jobs["dlq-replay"](svc)})
	}
	if rc.BackfillEnabled {
		schedules = append(schedules, reconcile.Schedule{Spec: "@every " + rc.BackfillInterval.String(), Job: jobs["replication-backfill"](svc)})
	}
	lease := lease.New(deps.Redis.Client(keys.LeaderLease.DB), deps.Redis.Keys().LeaderLease("reconcile"), rc.LeaseTTL)
	leader := reconcile.NewLeader(lease, log)
	sched, err := reconcile.NewScheduler(leader, deps.Redis, metrics, log, schedules...)
	if err != nil {
		return err
	}
	ops, err := app.NewOpsServer(rc.OpsAddr, deps.Checks()...)
	if err != nil {
		return err
	}
	defer ops.Close(log)
	if cfg.Log.Pprof {
		ops.Profile()
	}
	ops.Mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))

	names := make([]string, len(schedules))
	for i, s := range schedules {
		names[i] = s.Job.Name() + " " + s.Spec
	}
	log.InfoContext(ctx, "reconcile started", "ops", ops.Addr(), "owner", lease.Owner(), "schedules", strings.Join(names, "; "))
	leaderDone := make(chan struct{})
	go func() { defer close(leaderDone); leader.Run(ctx) }()
	sched.Run(ctx)
	<-leaderDone
	// The scheduler returns once a signal canceled ctx: that is how the
	// reconciler stops, not a failure.
	log.Info("reconcile stopped")
	return nil
}

// attrMap turns a result's log value into the object -json prints, so the
// printed result and the logged one name each count alike.
func attrMap(v slog.Value) any {
	v = v.Resolve()
	if v.Kind() != slog.KindGroup {
		return v.Any()
	}
	m := make(map[string]any)
	for _, a := range v.Group() {
		m[a.Key] = attrMap(a.Value)
	}
	return m
}
