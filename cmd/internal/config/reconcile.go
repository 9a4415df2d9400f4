package config

import (
	"strconv"
	"time"

	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// Reconcile is the configuration of cmd/reconcile.
type Reconcile struct {
	Log       Log
	MySQL     store.MySQLConfig
	Redis     Redis
	AMQP      AMQP
	Reconcile ReconcileSection
}

// ReconcileSection holds the cron jobs' settings.
type ReconcileSection struct {
	OpsAddr             string
	LeaseTTL            time.Duration
	BalanceSyncSchedule string
	BalanceSync         reconcile.BalanceSyncConfig
	BackfillEnabled     bool
	BackfillInterval    time.Duration
	Backfill            reconcile.BackfillConfig
	ReplayEnabled       bool
	ReplayBatchSize     int
	ReplayInterval      time.Duration
	OutboxPurgeSchedule string
	OutboxPurge         reconcile.OutboxPurgeConfig
}

func loadReconcile(l *loader) ReconcileSection {
	r := ReconcileSection{
		OpsAddr:  reconcileOpsAddr(l),
		LeaseTTL: l.Duration("RECONCILE_LEASE_TTL", 15*time.Second, time.Second, 10*time.Minute, "TTL of the leader lease; the leader renews it at a third. A leader that cannot renew it stops running jobs."),
		BalanceSyncSchedule: l.String("BALANCE_SYNC_SCHEDULE", "@every 30m",
			"When balance-sync runs: cron with optional seconds (\"0 */30 * * * *\") or a descriptor (\"@every 30m\"); \"off\" disables it."),
		BalanceSync: reconcile.BalanceSyncConfig{
			PendingAge: l.Duration("BALANCE_SYNC_PENDING_AGE", reconcile.PendingAgeDefault, time.Millisecond, 24*time.Hour,
				"balance-sync applies pending deductions older than this (their message is late or was lost)."),
			Quiet: l.Duration("BALANCE_SYNC_QUIET_PERIOD", reconcile.QuietDefault, time.Millisecond, 24*time.Hour,
				"balance-sync compares only users without ledger entries this recent."),
			Batch: l.Int("BALANCE_SYNC_BATCH", reconcile.BatchDefault, 1, 10000, "Users per SCAN batch, pipeline and SQL statement in balance-sync."),
			ConfirmDelay: l.Duration("BALANCE_SYNC_CONFIRM_DELAY", reconcile.ConfirmDelayDefault, 0, time.Hour,
				"How long a drift balance-sync would ADJUST waits, after which it asks again whether a billing message is queued, "+
					"unacknowledged or dead (RABBITMQ_MANAGEMENT_URL) and reads the user again; longer than a producer takes to publish "+
					"and than the broker's statistics lag (5 s). 0 asks once, with no wait."),
		},
		BackfillEnabled: l.Bool("OBJECT_REPLICATION_BACKFILL_ENABLED", false,
			"Schedule replication-backfill, which republishes the replication tasks stuck pending or failed (`reconcile -once replication-backfill` runs it either way)."),
		BackfillInterval: l.Millis("OBJECT_REPLICATION_BACKFILL_INTERVAL_MS", 5*time.Second, 100*time.Millisecond, 24*time.Hour,
			"How often replication-backfill runs, in ms."),
		Backfill: reconcile.BackfillConfig{
			StuckAfter: l.Millis("OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS", reconcile.BackfillStuckAfterDefault, time.Second, 30*24*time.Hour,
				"replication-backfill republishes a pending or failed task not updated for this long, in ms (600000: 10 min); "+
					"longer than a message waits in the replication queue and a copy takes, and than OBJECT_REPLICATION_RETRY_DELAY_MS."),
			Batch: l.Int("OBJECT_REPLICATION_BACKFILL_BATCH_SIZE", reconcile.BackfillBatchDefault, 1, 10000,
				"Replication tasks replication-backfill republishes at most per run, lowest id first."),
		},
		ReplayEnabled:   l.Bool("OBJECT_REPLICATION_DLQ_REPLAY_ENABLED", false, "Enable the dlq-replay job, which republishes stored dead replication messages."),
		ReplayBatchSize: l.Int("OBJECT_REPLICATION_DLQ_REPLAY_BATCH_SIZE", 100, 1, 10000, "Dead messages replayed per run."),
		ReplayInterval: l.Millis("OBJECT_REPLICATION_DLQ_REPLAY_INTERVAL_MS", 15*time.Second, 100*time.Millisecond, 24*time.Hour,
			"DLQ replay interval in ms."),
		OutboxPurgeSchedule: l.String("OUTBOX_PURGE_SCHEDULE", "@every 1h",
			"When outbox-purge runs (the published rows of outbox and object_outbox): cron or a descriptor, as BALANCE_SYNC_SCHEDULE; \"off\" disables it."),
		OutboxPurge: reconcile.OutboxPurgeConfig{
			Retention: l.Duration("OUTBOX_PURGE_RETENTION", reconcile.OutboxRetentionDefault, time.Minute, 10*365*24*time.Hour,
				"outbox-purge deletes outbox rows published longer ago than this (168h: a week to look into what was sent); rows not published are never deleted."),
			Batch: l.Int("OUTBOX_PURGE_BATCH", reconcile.OutboxPurgeBatchDefault, 1, 100000,
				"Rows outbox-purge deletes per statement (each a short transaction of its own)."),
		},
	}
	if r.BalanceSync.ConfirmDelay == 0 {
		r.BalanceSync.ConfirmDelay = -1 // set to 0: no wait (a zero field would take the default)
	}
	if r.BalanceSyncSchedule != "off" {
		if _, err := reconcile.Parser.Parse(r.BalanceSyncSchedule); err != nil {
			l.failf("BALANCE_SYNC_SCHEDULE", r.BalanceSyncSchedule, "not a schedule: %v", err)
		}
	}
	if r.OutboxPurgeSchedule != "off" {
		if _, err := reconcile.Parser.Parse(r.OutboxPurgeSchedule); err != nil {
			l.failf("OUTBOX_PURGE_SCHEDULE", r.OutboxPurgeSchedule, "not a schedule: %v", err)
		}
	}
	return r
}

// loadReconcileConfig reads the reconciler's Redis section without the
// start-up cleanup: it uses none of the volatile caches, which belong to the
// API and the worker, and must not empty theirs at each start or -once run.
func loadReconcileConfig(l *loader) Reconcile {
	r := Reconcile{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedisServer(l), AMQP: loadAMQP(l), Reconcile: loadReconcile(l)}
	// A failed task waits the retry delay before its next attempt: a
	// threshold this short would republish tasks whose retry is on its way.
	if delay := r.AMQP.Topology.Retry[topology.DomainObjectReplication].Delay; r.Reconcile.Backfill.StuckAfter <= delay {
		l.failf("OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS", strconv.FormatInt(r.Reconcile.Backfill.StuckAfter.Milliseconds(), 10),
			"want more than OBJECT_REPLICATION_RETRY_DELAY_MS (%s)", delay)
	}
	return r
}

// LoadReconcile reads the configuration of cmd/reconcile.
func LoadReconcile(lookupEnv func(string) (string, bool)) (Reconcile, error) {
	return load(lookupEnv, loadReconcileConfig)
}
