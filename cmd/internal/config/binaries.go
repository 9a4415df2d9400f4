package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/internal/service/relay"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// load runs one binary's loader over lookupEnv and reports every problem at once.
func load[T any](lookupEnv func(string) (string, bool), f func(*loader) T) (T, error) {
	l := newLoader(lookupEnv)
	c := f(l)
	return c, l.err()
}

// API is the configuration of cmd/api.
type API struct {
	Log      Log
	MySQL    store.MySQLConfig
	Redis    Redis
	AMQP     AMQP
	HTTP     HTTP
	JWT      JWT
	Objects  Objects
	Payments Payments
	Console  Console
}

// HTTP is the API server section.
type HTTP struct {
	Addr              string
	OpsAddr           string // "" = none
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	MaxBodyBytes      int64
	Proxies           httpapi.Proxies // whose X-Forwarded-For entries the API believes (edge.go)
	TrustProxyOld     bool            // Proxies came from the deprecated API_TRUST_PROXY: warn at start
	PublicMetrics     bool            // /metrics on Addr too
	BanCheckInterval  time.Duration
	CodePepper        string // "" = derived from the token key

	ScoreSubmitPerMinute int // mini game score submissions per user and game in a minute
	UsageBatchMax        int // most usages a POST /v1/agent/usage/batch takes
}

func loadHTTP(l *loader) HTTP {
	h := HTTP{
		Addr:              loadAPIAddr(l),
		OpsAddr:           apiOpsAddr(l),
		ReadHeaderTimeout: l.Duration("API_READ_HEADER_TIMEOUT", 5*time.Second, 100*time.Millisecond, time.Minute, "Longest a client may take to send request headers."),
		ReadTimeout:       l.Duration("API_READ_TIMEOUT", 30*time.Second, time.Second, 10*time.Minute, "Longest a client may take to send a whole request."),
		WriteTimeout:      l.Duration("API_WRITE_TIMEOUT", 30*time.Second, time.Second, 10*time.Minute, "Longest the API may take to answer a request."),
		IdleTimeout:       l.Duration("API_IDLE_TIMEOUT", 120*time.Second, time.Second, time.Hour, "How long an idle keep-alive connection stays open."),
		ShutdownTimeout:   l.Duration("API_SHUTDOWN_TIMEOUT", 20*time.Second, time.Second, 10*time.Minute, "How long the API waits for requests in flight at SIGTERM."),
		MaxBodyBytes:      int64(l.Int("API_MAX_BODY_BYTES", 1<<20, 1024, 1<<30, "Largest request body of an endpoint that sets no limit of its own (413 above it).")),
		BanCheckInterval: l.Duration("API_BAN_CHECK_INTERVAL", httpapi.BanCheckIntervalDefault, 100*time.Millisecond, 30*time.Second,
			"How often the API compares Redis's ban list with MySQL's (user_ban) and rebuilds it when Redis lost bans or came back from an older snapshot; meanwhile MySQL answers the ban check."),
		CodePepper: l.Secret("EMAIL_CODE_PEPPER", "",
			"Key of the HMAC that email verification codes are kept as in Redis (verify:code); empty: one derived from the token key. Changing it voids the codes in flight."),
		ScoreSubmitPerMinute: l.Int("GAME_SCORE_SUBMIT_PER_MINUTE", httpapi.ScoreSubmitPerMinuteDefault, 1, 1_000_000,
			"Mini game score submissions a user may make per game in a minute (mg:score:submit:rate, INCR+EXPIRE); more are answered 429 with Retry-After. The Spring backend's limit is 10; raise it for load tests."),
		UsageBatchMax: l.Int("AGENT_USAGE_BATCH_MAX", httpapi.UsageBatchMaxDefault, 1, httpapi.UsageBatchMaxLimit,
			"Most usage items one POST /v1/agent/usage/batch takes (413 above it); its body may be 1 KiB an item."),
	}
	h.Proxies, h.TrustProxyOld = loadProxies(l)
	h.PublicMetrics = apiMetricsPublic(l)
	return h
}

// loadAPIAddr reads the API's address: where it listens, and where
// islectl pay simulate posts callbacks (APIURL).
func loadAPIAddr(l *loader) string {
	return l.String("API_ADDR", ":8080", "Address the API listens on; islectl pay simulate posts to it (on 127.0.0.1 when the host is empty or 0.0.0.0).")
}

func loadAPI(l *loader) API {
	c := API{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l), HTTP: loadHTTP(l), JWT: loadJWT(l), Objects: loadObjects(l), Payments: loadPayments(l)}
	c.Console = loadConsole(l, c.HTTP.Addr)
	c.Console.Enabled = l.Bool("ADMIN_CONSOLE_ENABLED", true,
		"Serve the operator console (doc/console.md) under /admin/ to tokens of the admin role; `islectl console` serves it alone on loopback.")
	if c.JWT.missing != nil {
		l.errs = append(l.errs, c.JWT.missing) // the API needs a key to start
	}
	c.Payments.refuseTestKeys(l, c.JWT.Dev)
	return c
}

// LoadAPI reads the configuration of cmd/api.
func LoadAPI(lookupEnv func(string) (string, bool)) (API, error) { return load(lookupEnv, loadAPI) }

// opsAddrDoc says why an operations address defaults to loopback.
func opsAddrDoc(port string) string {
	return "The default listens on loopback only, for probes and scrapers on the same machine; " +
		"where they connect from elsewhere (another container, a Prometheus host), set e.g. 0.0.0.0:" + port + "."
}

// The operations addresses of the worker, the relay and the reconciler:
// each serves on its own, and the operator console checks their /healthz.
func workerOpsAddr(l *loader) string {
	return l.OptionalAddr("WORKER_OPS_ADDR", "127.0.0.1:9090", "Address of the worker's /healthz and /metrics; empty to serve none. "+opsAddrDoc("9090"))
}

func relayOpsAddr(l *loader) string {
	return l.OptionalAddr("RELAY_OPS_ADDR", "127.0.0.1:9091", "Address of the relay's /healthz and /metrics; empty to serve none. "+opsAddrDoc("9091"))
}

func reconcileOpsAddr(l *loader) string {
	return l.OptionalAddr("RECONCILE_OPS_ADDR", "127.0.0.1:9092", "Address of the reconciler's /healthz and /metrics; empty to serve none. "+opsAddrDoc("9092"))
}

// Worker is the configuration of cmd/worker. Payments are the gateways'
// keys, the API's variables: the payment-notify consumer verifies with them
// the callback in the rawBody of a paid notification without its amount
// (doc/payments.md). Dev is ISLE_DEV, without which test keys are refused.
type Worker struct {
	Log      Log
	MySQL    store.MySQLConfig
	Redis    Redis
	AMQP     AMQP
	Worker   WorkerSection
	Objects  Objects
	Mail     Mail
	Payments Payments
	Dev      bool
}

// WorkerSection holds the consumer settings.
type WorkerSection struct {
	OpsAddr            string
	Prefetch           int
	Batch              int            // the group commit of agent-billing and agent-usage-stats: their prefetch is at least twice this
	Concurrency        map[string]int // channels per queue, by domain; every domain is present
	HandlerTimeout     time.Duration
	ShutdownTimeout    time.Duration
	SourceFetchTimeout time.Duration
	Subscriber         string // SubscriberIsle or SubscriberWatermillAMQP
}

// The worker's subscribers (WORKER_SUBSCRIBER).
const (
	SubscriberIsle          = "isle"
	SubscriberWatermillAMQP = "watermill-amqp"
)

func loadWorker(l *loader) WorkerSection {
	w := WorkerSection{
		OpsAddr: workerOpsAddr(l),
		Prefetch: l.Int("WORKER_PREFETCH", messaging.PrefetchDefault, 1, 65535,
			"Unacknowledged deliveries each consuming channel may hold (AMQP prefetch): as the Router handles each in its own goroutine, a queue has up to channels × prefetch messages in its handlers at once."),
		Batch: l.Int("WORKER_BATCH", store.WriterBatchMax, 1, 1000,
			"Group commit of the agent-billing and agent-usage-stats consumers: each of their channels holds this many deliveries (WORKER_PREFETCH if larger), so that the messages in flight share MySQL transactions and Redis pipelines of up to 100."),
		HandlerTimeout: l.Duration("WORKER_HANDLER_TIMEOUT", messaging.HandlerTimeoutDefault, time.Second, 25*time.Minute,
			"Longest one handler call may run; keep it under RabbitMQ's consumer_timeout (30 min)."),
		ShutdownTimeout: l.Duration("WORKER_SHUTDOWN_TIMEOUT", messaging.ShutdownTimeoutDefault, time.Second, 10*time.Minute,
			"How long a worker lets handlers in flight finish at SIGTERM (the Router's close timeout); then they are canceled and their messages requeued."),
		SourceFetchTimeout: l.Millis("OBJECT_REPLICATION_SOURCE_FETCH_TIMEOUT_MS", 60*time.Second, time.Second, time.Hour,
			"Timeout of one source download by the replication consumer, in ms."),
		Concurrency: map[string]int{},
	}
	def := l.Int("WORKER_CONCURRENCY", 4, 1, 256,
		"Channels consuming each main queue, each with WORKER_PREFETCH deliveries handed to the Router at once.")
	for _, d := range topology.DomainNames() {
		w.Concurrency[d] = def
	}
	for _, item := range l.List("WORKER_CONCURRENCY_BY_DOMAIN", nil,
		"Per-domain overrides of WORKER_CONCURRENCY, comma-separated domain=N (e.g. email=16).") {
		name, val, ok := cutEq(item)
		n, err := strconv.Atoi(val)
		if _, known := w.Concurrency[name]; !ok || !known || err != nil || n < 1 || n > 256 {
			l.failf("WORKER_CONCURRENCY_BY_DOMAIN", item, "want domain=N with a domain of %s and N in 1..256", strings.Join(topology.DomainNames(), ", "))
			continue
		}
		w.Concurrency[name] = n
	}
	w.Subscriber = l.OneOf("WORKER_SUBSCRIBER", SubscriberIsle, []string{SubscriberIsle, SubscriberWatermillAMQP},
		"What consumes the queues for the worker's handlers: isle (internal/kit/messaging's subscriber), or watermill-amqp (watermill-amqp/v3's subscriber, with the same channels, prefetch, handlers and middleware). "+
			"watermill-amqp exists only to compare the two (`islectl bench`, doc/messaging.md) and is much slower: each of its channels hands out one delivery at a time and waits for its ack before the next. "+
			"It is refused without ISLE_BENCH=1: it tells no redelivery apart, so a redelivered message without an id (a Spring producer's) would be applied twice.")
	bench := l.Bool("ISLE_BENCH", false,
		"Set by `islectl bench` for the processes it starts: lets the worker run WORKER_SUBSCRIBER=watermill-amqp, which is unsafe for real traffic.")
	if w.Subscriber == SubscriberWatermillAMQP && !bench {
		l.failf("WORKER_SUBSCRIBER", w.Subscriber, "watermill-amqp gives each delivery a new id and no redelivered flag, so a redelivered message without an id would be applied twice: it is for `islectl bench` only (ISLE_BENCH=1)")
	}
	return w
}

func loadWorkerConfig(l *loader) Worker {
	w := Worker{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l), Worker: loadWorker(l), Objects: loadObjects(l), Mail: loadMail(l),
		Payments: loadPayments(l), Dev: loadDev(l)}
	w.Payments.refuseTestKeys(l, w.Dev)
	if _, err := w.Payments.Gateways(); err != nil { // the keys are checked with every other variable
		l.errs = append(l.errs, err)
	}
	return w
}

// LoadWorker reads the configuration of cmd/worker.
func LoadWorker(lookupEnv func(string) (string, bool)) (Worker, error) {
	return load(lookupEnv, loadWorkerConfig)
}

// Relay is the configuration of cmd/relay.
type Relay struct {
	Log   Log
	MySQL store.MySQLConfig
	AMQP  AMQP
	Relay RelaySection
}

// RelaySection holds the outbox relay settings (doc/outbox.md).
type RelaySection struct {
	OpsAddr            string
	ReplicationEnabled bool
	Enabled            bool
	BatchSize          int
	Interval           time.Duration
	Lease              time.Duration
}

func loadRelay(l *loader) RelaySection {
	return RelaySection{
		OpsAddr:            relayOpsAddr(l),
		ReplicationEnabled: l.Bool("OBJECT_REPLICATION_ENABLED", true, "Enable the object replication subsystem."),
		Enabled:            l.Bool("OBJECT_REPLICATION_OUTBOX_RELAY_ENABLED", true, "Enable outbox relay polling."),
		BatchSize:          l.Int("OBJECT_REPLICATION_OUTBOX_RELAY_BATCH_SIZE", 100, 1, 10000, "Outbox rows claimed per poll."),
		Interval: l.Millis("OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS", relay.IntervalDefault, 10*time.Millisecond, time.Hour,
			"Longest wait between two polls of an outbox table, in ms: a full batch is followed by the next at once, one that found rows by a poll after 50 ms, and empty polls by waits doubling from 50 ms up to this. The Spring backend's 3000 left a row waiting up to 3 s; a relay polling idle tables every 100 ms added no measurable CPU to MariaDB here."),
		Lease: l.Millis("OBJECT_REPLICATION_OUTBOX_RELAY_LEASE_MS", relay.LeaseDefault, time.Second, time.Hour,
			"How long a relay holds the outbox rows it claimed, in ms: a relay that dies leaves them to another after this. "+
				"Longer than RABBITMQ_PUBLISH_TIMEOUT, which bounds a batch's publishes (they run at once)."),
	}
}

func loadRelayConfig(l *loader) Relay {
	r := Relay{Log: loadLog(l), MySQL: loadMySQL(l), AMQP: loadAMQP(l), Relay: loadRelay(l)}
	if r.Relay.Lease <= r.AMQP.PublishTimeout {
		l.failf("OBJECT_REPLICATION_OUTBOX_RELAY_LEASE_MS", strconv.FormatInt(r.Relay.Lease.Milliseconds(), 10),
			"want more than RABBITMQ_PUBLISH_TIMEOUT (%s): a lease must outlast a batch's publishes", r.AMQP.PublishTimeout)
	}
	return r
}

// LoadRelay reads the configuration of cmd/relay.
func LoadRelay(lookupEnv func(string) (string, bool)) (Relay, error) {
	return load(lookupEnv, loadRelayConfig)
}

// Islectl is the configuration of cmd/islectl: the connections, the token
// key, which only islectl token needs (JWT.Key says when it is missing),
// the API's address, where islectl pay simulate posts, and the console's
// section, for islectl console.
type Islectl struct {
	Log     Log
	MySQL   store.MySQLConfig
	Redis   Redis
	AMQP    AMQP
	JWT     JWT
	APIAddr string
	Console Console // islectl console
}

func loadIslectl(l *loader) Islectl {
	c := Islectl{Log: loadLog(l), MySQL: loadMySQL(l), Redis: loadRedis(l), AMQP: loadAMQP(l), JWT: loadJWT(l), APIAddr: loadAPIAddr(l)}
	c.Console = loadConsole(l, c.APIAddr)
	return c
}

// APIURL is the base URL of the API at APIAddr as seen from this machine:
// an empty or unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") is
// 127.0.0.1, as scripts/up reaches it.
func (c Islectl) APIURL() (string, error) {
	host, port, err := net.SplitHostPort(c.APIAddr)
	if err != nil {
		return "", fmt.Errorf("API_ADDR=%q: %w", c.APIAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// LoadIslectl reads the configuration of cmd/islectl.
func LoadIslectl(lookupEnv func(string) (string, bool)) (Islectl, error) {
	return load(lookupEnv, loadIslectl)
}

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
