package config_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// env is an environment holding exactly m, as os.LookupEnv sees one.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestDocMatchesTheCode(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../../doc/config.md")
	require.NoError(t, err)
	require.Equal(t, string(config.Markdown()), string(got), "doc/config.md is stale: run go generate ./cmd/internal/config")
}

func TestDefaultsAreTheSeeds(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWorker(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6379", c.Redis.Addr)
	for _, db := range keys.DBs() {
		require.Equal(t, db.DefaultIndex(), c.Redis.Databases[db], db.EnvVar())
	}
	require.Equal(t, 12, c.Redis.Databases[keys.DBAgentBilling])
	require.Equal(t, "amqp://guest:guest@127.0.0.1:5672/", c.AMQP.URL)
	require.True(t, c.Redis.CleanupOnStart)
	tp, err := topology.New(c.AMQP.Topology)
	require.NoError(t, err)
	require.Equal(t, "eisland", tp.Prefix())
	for _, d := range tp.Domains() {
		seed, ok := topology.SeedRetry(d.Name)
		if ok {
			require.Equal(t, seed, d.Retry, d.Name)
		}
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	c, err := config.LoadRelay(env(map[string]string{
		"EMAIL_NOTIFY_MAX_RETRIES":                    "7",
		"PAYMENT_NOTIFY_RETRY_DELAY_MS":               "250",
		"RABBITMQ_NAME_PREFIX":                        "t9",
		"RABBITMQ_VHOST":                              "isle",
		"RABBITMQ_TYPE_IDS":                           "ScoreUpsertMessage=cn.x.ScoreUpsertMessage",
		"OBJECT_REPLICATION_OUTBOX_RELAY_BATCH_SIZE":  "25",
		"OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS": "500",
	}))
	require.NoError(t, err)
	tp, err := topology.New(c.AMQP.Topology)
	require.NoError(t, err)
	email, _ := tp.Domain(topology.DomainEmail)
	require.Equal(t, 7, email.Retry.MaxRetries)
	for _, name := range []string{topology.DomainPaymentNotify, topology.DomainPaymentReceipt} {
		d, _ := tp.Domain(name)
		require.Equal(t, 250*time.Millisecond, d.Retry.Delay, "receipts share payment.notify-* as in the Spring backend")
	}
	score, _ := tp.Domain(topology.DomainMiniGameScore)
	require.Equal(t, "cn.x.ScoreUpsertMessage", score.TypeID)
	require.Equal(t, "t9.email.verify.exchange", email.Exchange)
	require.Equal(t, "amqp://guest:guest@127.0.0.1:5672/isle", c.AMQP.URL)
	require.Equal(t, 25, c.Relay.BatchSize)
	require.Equal(t, 500*time.Millisecond, c.Relay.Interval)
}

func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	_, err := config.LoadAPI(env(map[string]string{
		"REDIS_PORT":                   "abc",
		"REDIS_AGENT_BILLING_DATABASE": "16",
		"REDIS_TIMEOUT":                "soon",
		"EMAIL_NOTIFY_MAX_RETRIES":     "-1",
		"LOG_LEVEL":                    "loud",
		"MYSQL_DSN":                    "not a dsn",
		"RABBITMQ_NAME_PREFIX":         "bad prefix",
		"REDIS_CACHE_CLEAR_PATTERNS":   "12/agent:*",
		"REDIS_CACHE_CLEAR_ENABLED":    "maybe",
	}))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`REDIS_PORT="abc": not an integer`,
		`REDIS_AGENT_BILLING_DATABASE="16": out of range 0..15`,
		`REDIS_TIMEOUT="soon"`,
		`EMAIL_NOTIFY_MAX_RETRIES="-1": out of range`,
		`LOG_LEVEL="loud": want one of debug, info, warn, error`,
		"MYSQL_DSN",
		`prefix "bad prefix"`,
		"REDIS_CACHE_CLEAR_PATTERNS",
		`REDIS_CACHE_CLEAR_ENABLED="maybe"`,
	} {
		require.Contains(t, msg, want)
	}
	require.NotContains(t, msg, "not a dsn\"", "a DSN may hold a password: it is not echoed")
	require.GreaterOrEqual(t, strings.Count(msg, "\n"), 8, "one line per problem")
}

func TestEveryVariableIsDocumented(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, v := range config.Variables() {
		require.False(t, seen[v.Name], "%s read twice", v.Name)
		seen[v.Name] = true
		require.NotEmpty(t, v.Doc, v.Name)
		require.NotEmpty(t, v.Binaries, v.Name)
	}
	for _, name := range []string{"REDIS_HOST", "REDIS_PORT", "REDIS_PASSWORD", "REDIS_DATABASE", "REDIS_TIMEOUT",
		"REDIS_PAYMENT_DATABASE", "REDIS_MINI_GAME_DATABASE", "RABBITMQ_HOST", "RABBITMQ_PORT", "RABBITMQ_USERNAME",
		"RABBITMQ_PASSWORD", "RABBITMQ_VHOST", "EMAIL_NOTIFY_MAX_RETRIES", "EMAIL_NOTIFY_RETRY_DELAY_MS",
		"PAYMENT_NOTIFY_MAX_RETRIES", "PAYMENT_NOTIFY_RETRY_DELAY_MS", "OBJECT_REPLICATION_MAX_RETRIES",
		"OBJECT_REPLICATION_RETRY_DELAY_MS", "OBJECT_REPLICATION_OUTBOX_RELAY_BATCH_SIZE",
		"OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS", "OBJECT_REPLICATION_SOURCE_FETCH_TIMEOUT_MS", "MYSQL_DSN"} {
		require.True(t, seen[name], name)
	}
}

// A number of milliseconds so large that n × 1ms wraps (here to 5s, inside
// every range below) is out of range, not the wrapped value.
func TestHugeMillisecondsAreOutOfRange(t *testing.T) {
	t.Parallel()
	const huge = "288230376151716744" // 2^58 + 5000: × 10^6 ns wraps to 5000 ms
	_, err := config.LoadRelay(env(map[string]string{"OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS": huge}))
	require.ErrorContains(t, err, `OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS="288230376151716744": out of range 10..3600000 ms`)
	_, err = config.LoadAPI(env(map[string]string{"REDIS_TIMEOUT": huge}))
	require.ErrorContains(t, err, `REDIS_TIMEOUT="288230376151716744": out of range 1ms..1m0s`)

	c, err := config.LoadAPI(env(map[string]string{"REDIS_TIMEOUT": "60000", "API_JWT_LEEWAY": "0", "API_JWT_SECRET": strings.Repeat("s", 32)}))
	require.NoError(t, err, "the bounds themselves are in range")
	require.Equal(t, time.Minute, c.Redis.Timeout)
	require.Zero(t, c.JWT.Leeway)
}

// The reconciler uses no volatile cache, so it never clears them at start-up.
func TestReconcileDoesNotClearCaches(t *testing.T) {
	t.Parallel()
	c, err := config.LoadReconcile(env(map[string]string{"REDIS_CACHE_CLEAR_ENABLED": "true"}))
	require.NoError(t, err)
	require.False(t, c.Redis.CleanupOnStart)
	for _, v := range config.Variables() {
		if strings.HasPrefix(v.Name, "REDIS_CACHE_CLEAR_") {
			require.NotContains(t, v.Binaries, "reconcile", v.Name)
		}
	}
	w, err := config.LoadWorker(env(nil))
	require.NoError(t, err)
	require.True(t, w.Redis.CleanupOnStart, "the worker still does")
}

func TestKeyValueItemsNeedBothSides(t *testing.T) {
	t.Parallel()
	for _, item := range []string{"ScoreUpsertMessage", "=cn.x.Class", "ScoreUpsertMessage="} {
		_, err := config.LoadRelay(env(map[string]string{"RABBITMQ_TYPE_IDS": item}))
		require.ErrorContains(t, err, "want Record=ClassName", item)
	}
	c, err := config.LoadWorker(env(map[string]string{"WORKER_CONCURRENCY_BY_DOMAIN": "email=3"}))
	require.NoError(t, err)
	require.Equal(t, 3, c.Worker.Concurrency["email"])
}

// doc/config.md says "empty to serve none" of the operations addresses: set
// to empty, they serve nothing (unset, they take the default).
func TestEmptyOpsAddressesServeNone(t *testing.T) {
	t.Parallel()
	w, err := config.LoadWorker(env(map[string]string{"WORKER_OPS_ADDR": ""}))
	require.NoError(t, err)
	require.Empty(t, w.Worker.OpsAddr)
	r, err := config.LoadRelay(env(map[string]string{"RELAY_OPS_ADDR": ""}))
	require.NoError(t, err)
	require.Empty(t, r.Relay.OpsAddr)
	c, err := config.LoadReconcile(env(map[string]string{"RECONCILE_OPS_ADDR": " "}))
	require.NoError(t, err)
	require.Empty(t, c.Reconcile.OpsAddr)
	_, err = config.LoadWorker(env(map[string]string{"WORKER_OPS_ADDR": "9090"}))
	require.ErrorContains(t, err, `WORKER_OPS_ADDR="9090": want host:port`)
}

// Unset, the operations addresses listen on loopback only: /metrics and
// /healthz are for the machine's own probes and scrapers.
func TestOpsAddressesDefaultToLoopback(t *testing.T) {
	t.Parallel()
	w, err := config.LoadWorker(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9090", w.Worker.OpsAddr)
	r, err := config.LoadRelay(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9091", r.Relay.OpsAddr)
	c, err := config.LoadReconcile(env(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9092", c.Reconcile.OpsAddr)
}

// Without a key the API refuses to start, naming the variable to set and
// the explicit opt-in to the public development key, instead of running
// with a key anyone can read in the source and mint admin tokens with.
func TestAPIRefusesToStartWithoutAJWTSecret(t *testing.T) {
	t.Parallel()
	for _, e := range []map[string]string{nil, {"API_JWT_SECRET": ""}, {"ISLE_DEV": "0"}} {
		_, err := config.LoadAPI(env(e))
		require.ErrorContains(t, err, "API_JWT_SECRET", e)
		require.ErrorContains(t, err, "ISLE_DEV=1", e)
	}
	c, err := config.LoadAPI(env(map[string]string{"ISLE_DEV": "1"}))
	require.NoError(t, err, "ISLE_DEV=1 is the explicit opt-in")
	require.True(t, c.JWT.IsDefault)
	require.Equal(t, config.DevJWTSecret, string(c.JWT.Secret))
}

// scripts/up keeps a random key in a file; the API and islectl token read
// the same file, so the tokens islectl mints are the ones the API accepts.
func TestAPIAndIslectlTokenShareTheSecretFile(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/jwt-secret"
	key := strings.Repeat("k3y", 16)
	require.NoError(t, os.WriteFile(file, []byte(key+"\n"), 0o600))
	e := env(map[string]string{"API_JWT_SECRET_FILE": file})
	api, err := config.LoadAPI(e)
	require.NoError(t, err)
	require.Equal(t, key, string(api.JWT.Secret))
	require.False(t, api.JWT.IsDefault)
	ctl, err := config.LoadIslectl(e)
	require.NoError(t, err)
	require.Equal(t, api.JWT.Secret, ctl.JWT.Secret)
}

// islectl needs a key only to mint tokens: migrate and the rest run
// without one. A key file that is named but unreadable, or a short key, is
// a bad variable wherever it is read.
func TestIslectlNeedsAKeyOnlyForTokens(t *testing.T) {
	t.Parallel()
	c, err := config.LoadIslectl(env(nil))
	require.NoError(t, err)
	_, err = c.JWT.Key()
	require.ErrorContains(t, err, "API_JWT_SECRET is not set")
	require.ErrorContains(t, err, "ISLE_DEV=1")

	dir := t.TempDir()
	_, err = config.LoadIslectl(env(map[string]string{"API_JWT_SECRET_FILE": dir + "/missing"}))
	require.ErrorContains(t, err, "API_JWT_SECRET_FILE=")
	require.NoError(t, os.WriteFile(dir+"/short", []byte("short\n"), 0o600))
	_, err = config.LoadAPI(env(map[string]string{"API_JWT_SECRET_FILE": dir + "/short"}))
	require.ErrorContains(t, err, "5 bytes; want at least 32")
	c, err = config.LoadIslectl(env(map[string]string{"API_JWT_SECRET": strings.Repeat("s", 32), "API_JWT_SECRET_FILE": dir + "/short"}))
	require.NoError(t, err, "API_JWT_SECRET wins over the file")
	key, err := c.JWT.Key()
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("s", 32), string(key))
}

func TestRelayLeaseOutlastsAPublish(t *testing.T) {
	c, err := config.LoadRelay(env(nil))
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, c.Relay.Lease)
	_, err = config.LoadRelay(env(map[string]string{"OBJECT_REPLICATION_OUTBOX_RELAY_LEASE_MS": "5000", "RABBITMQ_PUBLISH_TIMEOUT": "5s"}))
	require.ErrorContains(t, err, "OBJECT_REPLICATION_OUTBOX_RELAY_LEASE_MS")
	c, err = config.LoadRelay(env(map[string]string{"OBJECT_REPLICATION_OUTBOX_RELAY_LEASE_MS": "2000", "RABBITMQ_PUBLISH_TIMEOUT": "1s"}))
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, c.Relay.Lease)
}

func TestOutboxPurgeSettings(t *testing.T) {
	c, err := config.LoadReconcile(env(nil))
	require.NoError(t, err)
	require.Equal(t, "@every 1h", c.Reconcile.OutboxPurgeSchedule)
	require.Equal(t, 7*24*time.Hour, c.Reconcile.OutboxPurge.Retention)
	require.Equal(t, 1000, c.Reconcile.OutboxPurge.Batch)
	_, err = config.LoadReconcile(env(map[string]string{"OUTBOX_PURGE_SCHEDULE": "every hour", "OUTBOX_PURGE_RETENTION": "0"}))
	require.ErrorContains(t, err, "OUTBOX_PURGE_SCHEDULE")
	require.ErrorContains(t, err, "OUTBOX_PURGE_RETENTION")
}

func TestReplicationBackfillSettings(t *testing.T) {
	c, err := config.LoadReconcile(env(nil))
	require.NoError(t, err)
	require.False(t, c.Reconcile.BackfillEnabled, "off by default (doc/config.md)")
	require.Equal(t, 5*time.Second, c.Reconcile.BackfillInterval)
	require.Equal(t, 10*time.Minute, c.Reconcile.Backfill.StuckAfter)
	require.Equal(t, 200, c.Reconcile.Backfill.Batch)
	c, err = config.LoadReconcile(env(map[string]string{"OBJECT_REPLICATION_BACKFILL_ENABLED": "true", "OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS": "120000"}))
	require.NoError(t, err)
	require.True(t, c.Reconcile.BackfillEnabled)
	require.Equal(t, 2*time.Minute, c.Reconcile.Backfill.StuckAfter)
	_, err = config.LoadReconcile(env(map[string]string{"OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS": "20000", "OBJECT_REPLICATION_RETRY_DELAY_MS": "30000"}))
	require.ErrorContains(t, err, "OBJECT_REPLICATION_BACKFILL_THRESHOLD_MS")
	require.ErrorContains(t, err, "OBJECT_REPLICATION_RETRY_DELAY_MS")
}

// islectl pay simulate posts where the API listens, on loopback when the
// API listens on every interface.
func TestIslectlAPIURLFollowsAPIAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"":                "http://127.0.0.1:8080",
		":9000":           "http://127.0.0.1:9000",
		"0.0.0.0:8081":    "http://127.0.0.1:8081",
		"[::]:8082":       "http://127.0.0.1:8082",
		"10.0.0.5:8080":   "http://10.0.0.5:8080",
		"[::1]:8080":      "http://[::1]:8080",
		"api.local:80":    "http://api.local:80",
		"127.0.0.1:18080": "http://127.0.0.1:18080",
	} {
		c, err := config.LoadIslectl(env(map[string]string{"API_ADDR": addr}))
		require.NoError(t, err)
		got, err := c.APIURL()
		require.NoError(t, err, addr)
		require.Equal(t, want, got, addr)
	}
	c, err := config.LoadIslectl(env(map[string]string{"API_ADDR": "8080"}))
	require.NoError(t, err)
	_, err = c.APIURL()
	require.ErrorContains(t, err, `API_ADDR="8080"`)
}

// S3 stores are configured by URL and keys: with the keys set the loaders
// take s3:// URLs, and without them they name the variable at fault.
func TestS3StoresLoadWithTheirKeys(t *testing.T) {
	t.Parallel()
	s3 := map[string]string{
		"OBJECT_STORE_SOURCE_URL":       "s3://isle-source?endpoint=minio:9000&secure=false",
		"OBJECT_REPLICATION_TARGET_URL": "s3://isle-replica?endpoint=minio:9000&secure=false",
		"IDENTITY_MATERIAL_STORE_URL":   "s3://isle-identity?endpoint=minio:9000&secure=false",
		"OBJECT_STORE_ACCESS_KEY":       "isle", "OBJECT_STORE_SECRET_KEY": "isle-secret",
		"API_JWT_SECRET": strings.Repeat("s", 32),
	}
	_, err := config.LoadAPI(env(s3))
	require.NoError(t, err)
	w, err := config.LoadWorker(env(s3))
	require.NoError(t, err)
	require.Equal(t, "isle", w.Objects.Identity.AccessKey, "the other stores take the source's keys")

	delete(s3, "OBJECT_STORE_SECRET_KEY")
	_, err = config.LoadWorker(env(s3))
	require.ErrorContains(t, err, "OBJECT_STORE_SOURCE_URL")
	require.ErrorContains(t, err, "AccessKey and SecretKey")
	s3["OBJECT_STORE_SOURCE_URL"] = "s3://isle-source/some/object?endpoint=minio:9000"
	s3["OBJECT_STORE_SECRET_KEY"] = "isle-secret"
	_, err = config.LoadWorker(env(s3))
	require.ErrorContains(t, err, "names a bucket, not an object")
}

// WORKER_SUBSCRIBER picks Isle's subscriber unless watermill-amqp's is
// asked for by islectl bench, which compares the two (ISLE_BENCH=1):
// watermill-amqp's tells no redelivery apart and gives each delivery a new
// id, so a redelivered message without an id would be applied twice.
// Nothing else is taken.
func TestWorkerSubscriber(t *testing.T) {
	t.Parallel()
	w, err := config.LoadWorker(env(nil))
	require.NoError(t, err)
	require.Equal(t, config.SubscriberIsle, w.Worker.Subscriber)
	_, err = config.LoadWorker(env(map[string]string{"WORKER_SUBSCRIBER": "watermill-amqp"}))
	require.ErrorContains(t, err, "ISLE_BENCH=1", "refused outside the bench")
	w, err = config.LoadWorker(env(map[string]string{"WORKER_SUBSCRIBER": "Watermill-AMQP", "ISLE_BENCH": "1"}))
	require.NoError(t, err)
	require.Equal(t, config.SubscriberWatermillAMQP, w.Worker.Subscriber)
	_, err = config.LoadWorker(env(map[string]string{"WORKER_SUBSCRIBER": "watermill"}))
	require.ErrorContains(t, err, `WORKER_SUBSCRIBER="watermill": want one of isle, watermill-amqp`)
}

func TestTracingSamplerRatioIsChecked(t *testing.T) {
	t.Parallel()
	// The SDK takes a ratio it cannot read as 1: every trace recorded, with
	// nothing said at start. The loader refuses it with the rest.
	for arg, want := range map[string]string{
		"%!g(int=0)": `OTEL_TRACES_SAMPLER_ARG="%!g(int=0)": want a ratio 0..1 (e.g. 0.1) for parentbased_traceidratio`,
		"10":         `OTEL_TRACES_SAMPLER_ARG="10": want a ratio 0..1`,
		"-0.5":       `OTEL_TRACES_SAMPLER_ARG="-0.5": want a ratio 0..1`,
		"NaN":        `OTEL_TRACES_SAMPLER_ARG="NaN": want a ratio 0..1`,
	} {
		_, err := config.LoadWorker(env(map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": arg}))
		require.ErrorContains(t, err, want, arg)
	}
	for _, arg := range []string{"0", "0.1", "1", ""} {
		_, err := config.LoadWorker(env(map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": arg}))
		require.NoError(t, err, arg)
	}
	// The other samplers take no argument: the SDK ignores it.
	_, err := config.LoadWorker(env(map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_always_on", "OTEL_TRACES_SAMPLER_ARG": "x"}))
	require.NoError(t, err)
}
