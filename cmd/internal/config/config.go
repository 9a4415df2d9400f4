// Package config parses every setting of Isle's binaries from environment
// variables, in one place. Names follow the Spring backend's (REDIS_HOST,
// REDIS_PAYMENT_DATABASE, EMAIL_NOTIFY_MAX_RETRIES, ...); defaults work
// against the local services; every bad variable is reported at once.
// doc/config.md is generated from the loaders themselves (go generate), and a
// test keeps it in step.
package config

//go:generate go run ./gendoc -o ../../../doc/config.md

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keyclean"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

// Defaults that are not the Spring backend's own.
const (
	MySQLDSNDefault      = "root@tcp(127.0.0.1:3306)/isle"
	RedisHostDefault     = "127.0.0.1"
	RedisPortDefault     = 6379
	RabbitHostDefault    = "127.0.0.1"
	RabbitPortDefault    = 5672
	RabbitUserDefault    = "guest"
	RabbitVHostDefault   = "/"
	ManagementURLDefault = "http://127.0.0.1:15672"
)

// Log is the logging and diagnostics section, read by every binary.
type Log struct {
	Level   slog.Level
	Format  string // json or text
	Pprof   bool   // serve /debug/pprof/ on the operations address
	Tracing Tracing
}

// Tracing is where a binary's OpenTelemetry spans go (doc/tracing.md).
// The SDK reads the OTEL_* variables itself; these are the ones that
// decide whether anything is exported, read here so that they are
// documented and checked.
type Tracing struct {
	Export  bool   // an OTLP endpoint is set and OTEL_TRACES_EXPORTER is not none
	Service string // OTEL_SERVICE_NAME; "" = isle- and the binary's name
}

func loadLog(l *loader) Log {
	lvl := l.OneOf("LOG_LEVEL", "info", []string{"debug", "info", "warn", "error"}, "Minimum level of log lines.")
	var level slog.Level
	_ = level.UnmarshalText([]byte(lvl))
	return Log{
		Level:  level,
		Format: l.OneOf("LOG_FORMAT", "json", []string{"json", "text"}, "Log line format: json (one object per line) or text (key=value)."),
		Pprof: l.Bool("PPROF_ENABLED", false,
			"Serve Go's profiler at /debug/pprof/ on the operations address (API_OPS_ADDR, WORKER_OPS_ADDR, RELAY_OPS_ADDR, RECONCILE_OPS_ADDR). Off by default: profiles show the process's internals and cost CPU while taken."),
		Tracing: loadTracing(l),
	}
}

func loadTracing(l *loader) Tracing {
	endpoint := l.String("OTEL_EXPORTER_OTLP_ENDPOINT", "",
		"OpenTelemetry: base URL of an OTLP/HTTP collector (e.g. http://127.0.0.1:4318; spans go to /v1/traces). Empty, and no OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: no span is exported, trace context still flows through (doc/tracing.md).")
	traces := l.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "",
		"OpenTelemetry: full URL spans are posted to (e.g. http://127.0.0.1:4318/v1/traces), instead of OTEL_EXPORTER_OTLP_ENDPOINT's.")
	for name, raw := range map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces} {
		if u, err := url.Parse(raw); raw != "" && (err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https")) {
			l.failf(name, raw, "not an http(s) URL")
		}
	}
	exporter := l.OneOf("OTEL_TRACES_EXPORTER", "otlp", []string{"otlp", "none"},
		"OpenTelemetry: otlp exports spans when an endpoint is set; none exports nothing whatever is set.")
	sampler := l.OneOf("OTEL_TRACES_SAMPLER", "parentbased_always_on",
		[]string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"},
		"OpenTelemetry: which traces are recorded; a parent-based sampler follows the sampled flag of an incoming traceparent (the Spring side's decision).")
	arg := l.String("OTEL_TRACES_SAMPLER_ARG", "",
		"OpenTelemetry: the ratio of the traceidratio samplers, 0..1, e.g. 0.1 for a tenth of the traces; empty is 1. The other samplers take none.")
	// The SDK reads a ratio it cannot parse, or one outside 0..1, as 1.
	if arg != "" && strings.HasSuffix(sampler, "traceidratio") {
		if v, err := strconv.ParseFloat(arg, 64); err != nil || !(v >= 0 && v <= 1) {
			l.failf("OTEL_TRACES_SAMPLER_ARG", arg, "want a ratio 0..1 (e.g. 0.1) for %s", sampler)
		}
	}
	return Tracing{
		Export:  exporter == "otlp" && (endpoint != "" || traces != ""),
		Service: l.String("OTEL_SERVICE_NAME", "", "OpenTelemetry: service.name of the binary's spans; empty: isle- and the binary's name (isle-api, isle-worker, ...)."),
	}
}

func loadMySQL(l *loader) store.MySQLConfig {
	c := store.MySQLConfig{
		DSN: l.Secret("MYSQL_DSN", MySQLDSNDefault,
			"MySQL/MariaDB DSN in go-sql-driver form. Isle adds parseTime, UTC and interpolateParams. Use root@unix(/run/mysqld/mysqld.sock)/isle where root may only log in over the socket."),
		MaxOpenConns: l.Int("MYSQL_MAX_OPEN_CONNS", store.MySQLMaxOpenDefault, 1, 1000, "Most open MySQL connections per process."),
		MaxIdleConns: l.Int("MYSQL_MAX_IDLE_CONNS", store.MySQLMaxIdleDefault, 0, 1000, "Most idle MySQL connections kept per process."),
	}
	if _, err := store.NormalizeDSN(c.DSN); err != nil {
		l.errs = append(l.errs, fmt.Errorf("MYSQL_DSN: %w", err))
	}
	return c
}

// Redis is the Redis section: the server, the 15 logical databases, the key
// prefix and the start-up cleanup of volatile keys.
type Redis struct {
	store.RedisConfig
	CleanupOnStart  bool // false where the binary reads no cleanup settings
	CleanupPatterns []keyclean.Pattern
}

// loadRedis reads the Redis section with its start-up cleanup, for the
// binaries that own the volatile caches.
func loadRedis(l *loader) Redis {
	r := loadRedisServer(l)
	loadRedisCleanup(l, &r)
	return r
}

// loadRedisServer reads the Redis section without the start-up cleanup,
// which is then off.
func loadRedisServer(l *loader) Redis {
	host := l.String("REDIS_HOST", RedisHostDefault, "Redis server host; unused when REDIS_SENTINEL_ADDRS is set.")
	port := l.Int("REDIS_PORT", RedisPortDefault, 1, 65535, "Redis server port; unused when REDIS_SENTINEL_ADDRS is set.")
	r := Redis{RedisConfig: store.RedisConfig{
		Addr:      net.JoinHostPort(host, strconv.Itoa(port)),
		Password:  l.Secret("REDIS_PASSWORD", "", "Redis password (AUTH); empty for none."),
		Timeout:   l.Duration("REDIS_TIMEOUT", store.RedisTimeoutDefault, time.Millisecond, time.Minute, "Redis dial, read and write timeout: a Go duration, or milliseconds."),
		Databases: make(map[keys.DB]int),
		KeyPrefix: l.String("REDIS_KEY_PREFIX", "", "Global prefix of every Redis key, for sharing one Redis between fleets; empty for none's names."),
	}}
	for _, db := range keys.DBs() {
		r.Databases[db] = l.Int(db.EnvVar(), db.DefaultIndex(), 0, 15, fmt.Sprintf("Redis database index: %s.", db.Purpose()))
	}
	if _, err := keys.NewBuilder(r.KeyPrefix); err != nil {
		l.errs = append(l.errs, fmt.Errorf("REDIS_KEY_PREFIX: %w", err))
	}
	loadRedisSentinel(l, &r)
	return r
}

// loadRedisSentinel reads the Sentinels that name the Redis master, if any
// (doc/scaling.md).
func loadRedisSentinel(l *loader, r *Redis) {
	r.SentinelAddrs = l.HostPorts("REDIS_SENTINEL_ADDRS", "10.0.0.5:26379",
		"Redis Sentinels, comma-separated host:port. Set, Isle asks them for the master named REDIS_SENTINEL_MASTER and follows it across failovers; "+
			"REDIS_HOST and REDIS_PORT are then unused. Empty for one Redis at REDIS_HOST:REDIS_PORT.")
	r.SentinelMaster = l.String("REDIS_SENTINEL_MASTER", "", "Name of the Redis master the Sentinels monitor; required with REDIS_SENTINEL_ADDRS.")
	r.SentinelPassword = l.Secret("REDIS_SENTINEL_PASSWORD", "", "Password (AUTH) of the Sentinels themselves; empty for none. REDIS_PASSWORD is the master's and replicas'.")
	if len(r.SentinelAddrs) > 0 && r.SentinelMaster == "" {
		l.errs = append(l.errs, errors.New("REDIS_SENTINEL_MASTER: required when REDIS_SENTINEL_ADDRS is set"))
	}
}

// loadRedisCleanup reads the start-up cleanup settings into r.
func loadRedisCleanup(l *loader, r *Redis) {
	r.CleanupOnStart = l.Bool("REDIS_CACHE_CLEAR_ENABLED", true,
		"Delete volatile keys (caches) at start-up (doc/keys.md). Persistent keys are never touched.")
	for _, p := range l.List("REDIS_CACHE_CLEAR_PATTERNS", nil,
		"Extra patterns the start-up cleanup deletes, comma-separated DB/pattern (e.g. 13/legacy:*). A pattern that could match persistent keys is refused.") {
		cp, err := keyclean.ParsePattern(p, r.Databases)
		if err != nil {
			l.errs = append(l.errs, fmt.Errorf("REDIS_CACHE_CLEAR_PATTERNS: %w", err))
			continue
		}
		r.CleanupPatterns = append(r.CleanupPatterns, cp)
	}
}

// AMQP is the RabbitMQ section: the connection, the management API and the
// wire contract's settings (name prefix, retry policies, type ids).
type AMQP struct {
	URL             string   // of the first address
	URLs            []string // of every address, in order (RABBITMQ_ADDRS)
	VHost           string
	PublishTimeout  time.Duration
	PublishChannels int
	// ManagementURL is the management API's URL with credentials, or
	// several separated by commas (a comma inside one escaped as %2C), as
	// rabbitadmin.New takes them.
	ManagementURL string
	Topology      topology.Config
}

func loadAMQP(l *loader) AMQP {
	host := l.String("RABBITMQ_HOST", RabbitHostDefault, "RabbitMQ host; unused when RABBITMQ_ADDRS is set.")
	port := l.Int("RABBITMQ_PORT", RabbitPortDefault, 1, 65535, "RabbitMQ AMQP port; unused when RABBITMQ_ADDRS is set.")
	addrs := l.HostPorts("RABBITMQ_ADDRS", "10.0.0.5:5672",
		"RabbitMQ cluster nodes, comma-separated host:port (e.g. 10.0.0.5:5672,10.0.0.6:5672): each connection goes to the first that answers, "+
			"and after a loss to the next one (doc/scaling.md). Empty for the one broker at RABBITMQ_HOST:RABBITMQ_PORT.")
	user := l.String("RABBITMQ_USERNAME", RabbitUserDefault,
		"RabbitMQ user. guest suits a local broker only: deployed, each binary connects as its own user with the least permissions it needs (doc/deploy.md, RabbitMQ users).")
	pass := l.Secret("RABBITMQ_PASSWORD", "guest", "RabbitMQ password.")
	vhost := l.String("RABBITMQ_VHOST", RabbitVHostDefault, "RabbitMQ virtual host.")
	if len(addrs) == 0 {
		addrs = []string{net.JoinHostPort(host, strconv.Itoa(port))}
	}
	var urls []string
	for _, addr := range addrs {
		u := url.URL{Scheme: "amqp", User: url.UserPassword(user, pass), Host: addr, Path: "/" + vhost}
		if vhost == "/" {
			u.Path = "/"
		}
		urls = append(urls, u.String())
	}
	a := AMQP{
		URL:   urls[0],
		URLs:  urls,
		VHost: vhost,
		PublishTimeout: l.Duration("RABBITMQ_PUBLISH_TIMEOUT", messaging.PublishTimeoutDefault, 100*time.Millisecond, 5*time.Minute,
			"Longest one publish may wait for a connection and the broker's confirm; a blocked or unreachable broker then yields an error (the API answers 503)."),
		PublishChannels: l.Int("RABBITMQ_PUBLISH_CHANNELS", messaging.PublishChannelsDefault, 1, 1024,
			"Confirm channels each process publishes on; each carries many publishes in flight (pipelined confirms)."),
	}
	mgmts := l.List("RABBITMQ_MANAGEMENT_URL", []string{ManagementURLDefault},
		"RabbitMQ management API, used by `islectl topology verify` to compare bindings and by balance-sync to count billing messages "+
			"queued or unacknowledged before it adjusts a balance; the RabbitMQ user's credentials are added. "+
			"For a cluster, comma-separated URLs (one per node, each serves the whole cluster), tried in order.")
	var withCreds []string
	for _, mgmt := range mgmts {
		mu, err := url.Parse(mgmt)
		if err != nil || mu.Host == "" {
			l.failf("RABBITMQ_MANAGEMENT_URL", mgmt, "not an absolute URL")
			continue
		}
		if mu.User == nil {
			mu.User = url.UserPassword(user, pass)
		}
		withCreds = append(withCreds, strings.ReplaceAll(mu.String(), ",", "%2C"))
	}
	if len(mgmts) == 0 {
		l.failf("RABBITMQ_MANAGEMENT_URL", "", "not an absolute URL")
	}
	a.ManagementURL = strings.Join(withCreds, ",")
	a.Topology = topology.Config{
		Prefix: l.String("RABBITMQ_NAME_PREFIX", topology.DefaultPrefix,
			"First segment of every exchange, queue and routing key. Change it only to run a separate fleet on one broker."),
		TypeIDPackage: l.String("RABBITMQ_TYPE_ID_PACKAGE", topology.DefaultTypeIDPackage,
			"Java package put before a record name in the __TypeId__ header."),
		QueueType: l.OneOf("RABBITMQ_QUEUE_TYPE", topology.QueueClassic, topology.QueueTypes(),
			"Type the queues are declared with: classic, as the Spring backend declares them, or quorum (replicated across a cluster's nodes). "+
				"A live queue keeps its type: change it on both sides of the broker together (doc/contract.md, Queue type). "+
				"With quorum, start-up refuses a queue whose arguments a quorum queue cannot keep (the replication queue's x-max-priority) unless RABBITMQ_CLASSIC_QUEUES lists it."),
		ClassicQueues: l.List("RABBITMQ_CLASSIC_QUEUES", nil,
			"Queues that stay classic when RABBITMQ_QUEUE_TYPE is quorum, comma-separated full names (e.g. eisland.object.replication.process.queue)."),
		TypeIDs: make(map[string]string),
		Retry:   loadRetry(l),
	}
	for _, item := range l.List("RABBITMQ_TYPE_IDS", nil,
		"__TypeId__ overrides, comma-separated Record=fully.qualified.ClassName (e.g. ScoreUpsertMessage=com.x.ScoreUpsertMessage).") {
		rec, class, ok := cutEq(item)
		if !ok {
			l.failf("RABBITMQ_TYPE_IDS", item, "want Record=ClassName")
			continue
		}
		a.Topology.TypeIDs[rec] = class
	}
	if _, err := topology.New(a.Topology); err != nil {
		l.errs = append(l.errs, err)
	}
	return a
}

// cutEq splits a key=value item; ok is false unless both sides are non-empty.
func cutEq(s string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(s, "=")
	return key, value, ok && key != "" && value != ""
}

// loadRetry reads each domain's retry policy from the variables the
// topology names (Domain.EnvPrefix: the Spring backend's properties become e.g.
// EMAIL_NOTIFY_MAX_RETRIES). Domains that share a prefix (payment receipts
// share the payment.notify-* properties, as in the Spring backend) share the policy.
func loadRetry(l *loader) map[string]topology.RetryPolicy {
	tp, err := topology.New(topology.Config{})
	if err != nil {
		panic(err) // the default table is valid: a test holds it
	}
	out := make(map[string]topology.RetryPolicy)
	read := make(map[string]topology.RetryPolicy)
	for _, d := range tp.Domains() {
		if !d.HasRetry() {
			continue
		}
		p, ok := read[d.EnvPrefix]
		if !ok {
			p = topology.RetryPolicy{
				MaxRetries: l.Int(d.EnvPrefix+"_MAX_RETRIES", d.Retry.MaxRetries, 0, 1000,
					fmt.Sprintf("Retries before a message of %s goes to its DLQ.", d.Name)),
				Delay: l.Millis(d.EnvPrefix+"_RETRY_DELAY_MS", d.Retry.Delay, time.Millisecond, 24*time.Hour,
					fmt.Sprintf("x-message-ttl of the %s retry queue, in ms. A live queue keeps the TTL it was declared with: `islectl topology verify` shows a mismatch.", d.Name)),
			}
			read[d.EnvPrefix] = p
		}
		out[d.Name] = p
	}
	return out
}
