// Command reconcile runs Isle's cron jobs under a Redis leader lease:
// balance sync (doc/money.md), DLQ replay (doc/messaging.md), the purge
// of published outbox rows and the replication backfill (doc/outbox.md).
//
//	reconcile               schedule the jobs; any number of replicas run each once
//	reconcile -once JOB     run one job now, print its result and exit (for external schedulers)
//	reconcile -once JOB -json
//	                        the same, printed as {"job":...,"result":{...}}: the result's
//	                        fields named as in the log, durations as Go durations ("36h0m0s")
//
// Jobs: balance-sync, dlq-replay, outbox-purge, replication-backfill.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

func main() {
	app.Main("reconcile", func(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
		return run(ctx, args, lookupEnv, os.Stdout)
	})
}

// jobNames are the jobs' names, sorted, for -once and its usage.
var jobNames = app.JobNames

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	once := fs.String("once", "", "run one job now and exit: "+strings.Join(jobNames, ", "))
	asJSON := fs.Bool("json", false, "with -once: print the result as JSON")
	svc, cfg, err := app.Start(ctx, args, lookupEnv, app.Binary[config.Reconcile]{
		Name: "reconcile", Flags: fs, Load: config.LoadReconcile,
		CheckFlags: func() error {
			if *once != "" && !slices.Contains(jobNames, *once) {
				return fmt.Errorf("-once %q: want one of %s", *once, strings.Join(jobNames, ", "))
			}
			return nil
		},
		Log: func(c *config.Reconcile) config.Log { return c.Log },
		Needs: func(c *config.Reconcile) app.Needs {
			needs := app.Needs{MySQL: &c.MySQL, Redis: &c.Redis}
			if needsAMQP(c.Reconcile, *once) {
				needs.AMQP = &c.AMQP
			}
			return needs
		},
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	log, opened, reg := svc.Log, svc.Opened, svc.Registry
	rc := cfg.Reconcile

	metrics := reconcile.NewMetrics(reg)
	// balance-sync asks the broker's management API how many billing
	// messages are queued or unacknowledged before it adjusts a balance.
	admin, err := rabbitadmin.New(cfg.AMQP.ManagementURL, cfg.AMQP.VHost)
	if err != nil {
		return err
	}
	tp := opened.Topology // checked only when the reconciler publishes
	if tp == nil {
		if tp, err = topology.New(cfg.AMQP.Topology); err != nil {
			return err
		}
	}
	jd := app.Backends{DB: opened.DB, Redis: opened.Redis, Topology: tp, Admin: admin, Metrics: metrics, Log: log}
	if opened.AMQP != nil { // Needs asked for RabbitMQ: a job publishes
		pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: cfg.AMQP.URL, URLs: cfg.AMQP.URLs, Name: "isle-reconcile", Timeout: cfg.AMQP.PublishTimeout, Channels: 4,
			EnsureOnly: true}, // the api declares the topology
			opened.Topology, messaging.NewMetrics(reg), log)
		if err != nil {
			return err
		}
		defer pub.Close()
		jd.Publisher = pub
	}
	jobs, err := app.Jobs(jd, rc)
	if err != nil {
		return err
	}
	runner := reconcile.Runner{Redis: opened.Redis, Runs: store.NewJobRuns(opened.DB), Metrics: metrics, Log: log, Owner: app.ProcessName("reconcile")}

	if *once != "" {
		res, err := runner.Run(ctx, jobs[*once], "reconcile -once")
		if res != nil {
			if *asJSON {
				_ = json.NewEncoder(stdout).Encode(map[string]any{"job": *once, "result": reconcile.ResultFields(res)})
			} else {
				fmt.Fprintf(stdout, "%s: %s\n", *once, res)
			}
		}
		return err
	}

	var schedules []reconcile.Schedule
	specs := app.Schedules(rc)
	for _, name := range jobNames {
		if spec, ok := specs[name]; ok {
			schedules = append(schedules, reconcile.Schedule{Spec: spec, Job: jobs[name]})
		}
	}
	lease := lease.New(opened.Redis.Client(keys.LeaderLease.DB), opened.Redis.Keys().LeaderLease(reconcile.LeaderGroup), rc.LeaseTTL)
	leader := reconcile.NewLeader(lease, log)
	runner.Owner += ", lease " + lease.Owner() // the console tells the leader's runs by it
	sched, err := reconcile.NewScheduler(leader, runner, schedules...)
	if err != nil {
		return err
	}
	ops, err := svc.ServeOps(rc.OpsAddr)
	if err != nil {
		return err
	}
	defer ops.Close(log)

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

// needsAMQP reports whether the reconciler publishes: it schedules a job
// that does, or -once runs one.
func needsAMQP(rc config.ReconcileSection, once string) bool {
	return rc.ReplayEnabled || rc.BackfillEnabled || app.JobNeedsPublisher(once)
}
