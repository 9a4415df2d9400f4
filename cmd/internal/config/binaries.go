package config

import (
	"time"

	"github.com/eisland/isle/store"
)

// load runs one binary's loader over getenv and reports every problem at once.
func load[T any](getenv func(string) string, f func(*loader) T) (T, error) {
	l := newLoader(getenv)
	c := f(l)
	return c, l.err()
}

// API is the configuration of cmd/api.
type API struct {
	Log   Log
	MySQL store.MySQLConfig
	Redis Redis
	AMQP  AMQP
	HTTP  HTTP
}

// HTTP is the API server section.
type HTTP struct {
	Addr            string
	ShutdownTimeout time.Duration
}

func loadHTTP(l *loader) HTTP {
	return HTTP{
		Addr:            l.String("API_ADDR", ":8080", "Address the API listens on."),
		ShutdownTimeout: l.Duration("API_SHUTDOWN_TIMEOUT", 20*time.Second, time.Second, 10*time.Minute, "How long the API waits for requests in flight at SIGTERM."),
	}
}

func loadAPI(l *loader) API {
	return API{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l), HTTP: loadHTTP(l)}
}

// LoadAPI reads the configuration of cmd/api.
func LoadAPI(getenv func(string) string) (API, error) { return load(getenv, loadAPI) }

// Worker is the configuration of cmd/worker.
type Worker struct {
	Log    Log
	MySQL  store.MySQLConfig
	Redis  Redis
	AMQP   AMQP
	Worker WorkerSection
}

// WorkerSection holds the consumer settings.
type WorkerSection struct {
	OpsAddr            string
	SourceFetchTimeout time.Duration
	ShutdownTimeout    time.Duration
}

func loadWorker(l *loader) WorkerSection {
	return WorkerSection{
		OpsAddr: l.String("WORKER_OPS_ADDR", ":9090", "Address of the worker's /healthz and /metrics; empty to serve none."),
		SourceFetchTimeout: l.Millis("OBJECT_REPLICATION_SOURCE_FETCH_TIMEOUT_MS", 60*time.Second, time.Second, time.Hour,
			"Timeout of one source download by the replication consumer, in ms."),
		ShutdownTimeout: l.Duration("WORKER_SHUTDOWN_TIMEOUT", 30*time.Second, time.Second, 10*time.Minute,
			"How long a worker lets handlers in flight finish at SIGTERM."),
	}
}

func loadWorkerConfig(l *loader) Worker {
	return Worker{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l), Worker: loadWorker(l)}
}

// LoadWorker reads the configuration of cmd/worker.
func LoadWorker(getenv func(string) string) (Worker, error) { return load(getenv, loadWorkerConfig) }

// Relay is the configuration of cmd/relay.
type Relay struct {
	Log   Log
	MySQL store.MySQLConfig
	AMQP  AMQP
	Relay RelaySection
}

// RelaySection holds the outbox relay settings (seed 002 object-replication.*).
type RelaySection struct {
	OpsAddr            string
	ReplicationEnabled bool
	Enabled            bool
	BatchSize          int
	Interval           time.Duration
}

func loadRelay(l *loader) RelaySection {
	return RelaySection{
		OpsAddr:            l.String("RELAY_OPS_ADDR", ":9091", "Address of the relay's /healthz and /metrics; empty to serve none."),
		ReplicationEnabled: l.Bool("OBJECT_REPLICATION_ENABLED", true, "Enable the object replication subsystem."),
		Enabled:            l.Bool("OBJECT_REPLICATION_OUTBOX_RELAY_ENABLED", true, "Enable outbox relay polling."),
		BatchSize:          l.Int("OBJECT_REPLICATION_OUTBOX_RELAY_BATCH_SIZE", 100, 1, 10000, "Outbox rows claimed per poll."),
		Interval: l.Millis("OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS", 3*time.Second, 10*time.Millisecond, time.Hour,
			"Outbox poll interval in ms, while the last batch was not full."),
	}
}

func loadRelayConfig(l *loader) Relay {
	return Relay{Log: loadLog(l), MySQL: loadMySQL(l), AMQP: loadAMQP(l), Relay: loadRelay(l)}
}

// LoadRelay reads the configuration of cmd/relay.
func LoadRelay(getenv func(string) string) (Relay, error) { return load(getenv, loadRelayConfig) }

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
	OpsAddr           string
	BackfillEnabled   bool
	BackfillBatchSize int
	BackfillInterval  time.Duration
	ReplayEnabled     bool
	ReplayBatchSize   int
	ReplayInterval    time.Duration
}

func loadReconcile(l *loader) ReconcileSection {
	return ReconcileSection{
		OpsAddr:           l.String("RECONCILE_OPS_ADDR", ":9092", "Address of the reconciler's /healthz and /metrics; empty to serve none."),
		BackfillEnabled:   l.Bool("OBJECT_REPLICATION_BACKFILL_ENABLED", false, "Enable the backfill job for missed replications."),
		BackfillBatchSize: l.Int("OBJECT_REPLICATION_BACKFILL_BATCH_SIZE", 200, 1, 10000, "Replication tasks republished per backfill run."),
		BackfillInterval: l.Millis("OBJECT_REPLICATION_BACKFILL_INTERVAL_MS", 5*time.Second, 100*time.Millisecond, 24*time.Hour,
			"Backfill interval in ms."),
		ReplayEnabled:   l.Bool("OBJECT_REPLICATION_DLQ_REPLAY_ENABLED", false, "Enable the DLQ replay job."),
		ReplayBatchSize: l.Int("OBJECT_REPLICATION_DLQ_REPLAY_BATCH_SIZE", 100, 1, 10000, "Dead messages replayed per run."),
		ReplayInterval: l.Millis("OBJECT_REPLICATION_DLQ_REPLAY_INTERVAL_MS", 15*time.Second, 100*time.Millisecond, 24*time.Hour,
			"DLQ replay interval in ms."),
	}
}

func loadReconcileConfig(l *loader) Reconcile {
	return Reconcile{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l), Reconcile: loadReconcile(l)}
}

// LoadReconcile reads the configuration of cmd/reconcile.
func LoadReconcile(getenv func(string) string) (Reconcile, error) {
	return load(getenv, loadReconcileConfig)
}

// Islectl is the configuration of cmd/islectl: the connections only.
type Islectl struct {
	Log   Log
	MySQL store.MySQLConfig
	Redis Redis
	AMQP  AMQP
}

func loadIslectl(l *loader) Islectl {
	return Islectl{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l)}
}

// LoadIslectl reads the configuration of cmd/islectl.
func LoadIslectl(getenv func(string) string) (Islectl, error) { return load(getenv, loadIslectl) }

// binaries maps each binary to its loader; the documentation derives from it.
var binaries = []struct {
	name string
	load func(*loader)
}{
	{"api", func(l *loader) { loadAPI(l) }},
	{"worker", func(l *loader) { loadWorkerConfig(l) }},
	{"relay", func(l *loader) { loadRelayConfig(l) }},
	{"reconcile", func(l *loader) { loadReconcileConfig(l) }},
	{"islectl", func(l *loader) { loadIslectl(l) }},
}
