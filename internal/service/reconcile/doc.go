// Package reconcile runs the fleet's periodic jobs: balance-sync keeps the
// Redis balances and MySQL in agreement (doc/money.md), dlq-replay sends
// stored dead messages back (doc/messaging.md), outbox-purge deletes
// published outbox rows and replication-backfill republishes the
// replication tasks whose message was lost (doc/outbox.md). A job is a
// RunOnce returning a Result an operator reads; the Scheduler runs jobs on
// cron schedules (robfig/cron v3) in whichever process holds the Redis
// leader lease, so any number of replicas run each scheduled job once, and
// a per-job lock keeps a run started by `reconcile -once` (or the operator
// console's "run now") from overlapping the daemon's. A Runner runs a job
// under that lock, and records each run in MySQL (store.JobRuns, job_run): who
// started it, where it ran, when, and its result or error.
package reconcile
