// Package bench measures Isle's billing path against raw baselines taken in
// the same run, on the same machine: a bare amqp091 publisher and consumer,
// go-redis running the deduct script, a batched MySQL insert; then the
// usage API at several loads, the path from a request to its ledger row,
// the deduct consumer alone, the outbox relay's rate and lag, and what each
// process spent per request or row.
// Machines are shared and noisy: the ratios of one run are the figures to
// read, not absolute rates across runs. `islectl bench` runs it.
package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// Defaults of Config.
const (
	UsersDefault         = 200
	RawMessagesDefault   = 50_000
	RequestsDefault      = 20_000
	PhaseDefault         = 5 * time.Second
	E2EInFlightDefault   = 64
	BatchesDefault       = 400
	BatchSizeDefault     = 100 // the API's AGENT_USAGE_BATCH_MAX by default
	BatchInFlightDefault = 8
	FleetPrefixDefault   = "islebench"
	FleetDatabaseDefault = "isle_bench"
)

// Config says what to measure against. Zero fields take the defaults.
type Config struct {
	MySQL    store.MySQLConfig // the server (and, with URL, the fleet's database)
	Redis    store.RedisConfig // the server (and, with URL, the fleet's key prefix)
	AMQPURL  string
	Topology topology.Config // the fleet's names (with URL) and retry policies

	// URL is a running fleet's API; empty starts a fleet of the bench's own
	// from BinDir, isolated from any other on the same services (database
	// FleetDatabaseDefault, key and name prefix FleetPrefixDefault), and
	// removes it afterwards unless Keep.
	URL       string
	JWTSecret []byte // the running fleet's token key (with URL)
	BinDir    string // where api, worker and relay are (own fleet)
	Dir       string // where the own fleet's logs go; default a new temporary directory
	Keep      bool   // keep the own fleet's database, keys and queues
	Pprof     bool   // own fleet: serve the profiler on the api's, worker's and relay's operations addresses

	Users       int           // users the load spreads over
	RawMessages int           // messages of each raw RabbitMQ baseline
	Requests    int           // requests of the end-to-end phase, and messages of the consumer phase
	Phase       time.Duration // length of each timed load phase
	E2EInFlight int           // requests in flight in the end-to-end phase
	// The batch phase: how many batches, of how many charges, how many in
	// flight. An own fleet takes batches of up to BatchSize
	// (AGENT_USAGE_BATCH_MAX); a running one, what it was started with.
	Batches       int
	BatchSize     int
	BatchInFlight int
	// The relay phase: rows of the backlog it drains; the rate rows are
	// inserted at, for how long, to measure the lag; and the short poll
	// interval measured beside the relay's default.
	RelayRows     int
	RelayRate     int
	RelayLag      time.Duration
	RelayInterval time.Duration
	Phases        []string  // the phases to run, of Phases; nil for all
	Progress      io.Writer // progress lines; nil for none
}

// Phases are the bench's phases, in the order they run. A run of some of
// them (-phases) compares against the baselines only if it runs them.
var Phases = []string{"baselines", "usage", "e2e", "batch", "tracing", "consumer", "relay", "scores"}

// Rate is a count over a time.
type Rate struct {
	Count     int64   `json:"count"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

func rateOf(n int64, took time.Duration) Rate {
	r := Rate{Count: n, Seconds: took.Seconds()}
	if took > 0 {
		r.PerSecond = float64(n) / took.Seconds()
	}
	return r
}

// Baselines are the raw clients' figures.
type Baselines struct {
	RawPublish  Rate `json:"raw_publish"`    // amqp091, confirm window 256, persistent, durable classic queue
	RawConsume  Rate `json:"raw_consume"`    // prefetch 200, multi-ack every 100
	RawEndToEnd Rate `json:"raw_end_to_end"` // both at once on two connections
	RedisDeduct Rate `json:"redis_deduct"`   // deduct.lua through go-redis, 32 goroutines
	MySQLBatch  Rate `json:"mysql_batch"`    // rows/s, 100-row INSERTs, one connection
	// Limit is the composite limit of a charge from the three above.
	Limit CompositeLimit `json:"composite_limit"`
	// The billing queue's deduction messages taken by a consumer that only
	// acks (own fleet): each message on its own, as doc/money.md's "bare
	// consumer" (the consumer goal's measure), and with multi-ack.
	BareConsumer         Rate `json:"bare_consumer"`
	BareConsumerMultiAck Rate `json:"bare_consumer_multi_ack"`
}

// EndToEnd is the path from the first usage request to the last ledger row.
type EndToEnd struct {
	InFlight   int     `json:"inflight"`
	Requests   int64   `json:"requests"` // answered 200
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"` // first request to last ledger row
	PerSecond  float64 `json:"per_second"`
	RatioToRaw float64 `json:"ratio_to_raw_end_to_end"`
	// RatioToLimit is PerSecond ÷ Baselines.Limit.PerSecond.
	RatioToLimit float64      `json:"ratio_to_composite_limit"`
	CPU          []ProcessCPU `json:"cpu"` // until the fleet had done every request's work
}

// Consumer is the deduct consumer alone draining a queue of real deductions.
type Consumer struct {
	Skipped       string  `json:"skipped,omitempty"`
	Messages      int64   `json:"messages"`
	Seconds       float64 `json:"seconds"`
	PerSecond     float64 `json:"per_second"`
	RatioToBare   float64 `json:"ratio_to_bare_consumer"`
	RatioToMulti  float64 `json:"ratio_to_bare_consumer_multi_ack"`
	WorkerCPUms   float64 `json:"worker_cpu_ms_per_message"`
	WorkerPeakRSS int64   `json:"worker_peak_rss_bytes"`
	// The same consumer on watermill-amqp/v3's subscriber
	// (WORKER_SUBSCRIBER=watermill-amqp), on a quarter as many deductions.
	WatermillAMQP *SubscriberRun `json:"watermill_amqp,omitempty"`
}

// SubscriberRun is the deduct consumer alone on one of the worker's
// subscribers, draining the deductions queued for it.
type SubscriberRun struct {
	Subscriber    string  `json:"subscriber"` // WORKER_SUBSCRIBER
	Queued        int64   `json:"queued"`     // deductions queued for it
	Messages      int64   `json:"messages"`   // those timed: from the first ledger row seen to the last
	Seconds       float64 `json:"seconds"`
	PerSecond     float64 `json:"per_second"`
	RatioToBare   float64 `json:"ratio_to_bare_consumer"`
	RatioToIsle   float64 `json:"ratio_to_isle_subscriber"` // to Consumer.PerSecond
	WorkerCPUms   float64 `json:"worker_cpu_ms_per_message"`
	WorkerPeakRSS int64   `json:"worker_peak_rss_bytes"`
}

// Target is one of the bench's goals (doc/performance.md), checked on this run's figures.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
}

// Report is everything one run measured.
type Report struct {
	Started   time.Time `json:"started"`
	Seconds   float64   `json:"seconds"`
	CPUs      int       `json:"cpus"`
	GoVersion string    `json:"go_version"`
	Fleet     string    `json:"fleet"` // "own" or the URL
	Baselines Baselines `json:"baselines"`
	Usage     []Load    `json:"usage"` // the usage API at 1, 32 and 128 in flight, then at a fixed rate
	EndToEnd  EndToEnd  `json:"end_to_end"`
	Batched   Batched   `json:"batched"`
	Consumer  Consumer  `json:"consumer"`
	Relay     Relay     `json:"relay"`
	Scores    Scores    `json:"scores"`
	Tracing   Tracing   `json:"tracing"`
	Targets   []Target  `json:"targets"`
}

// run is one bench run's state.
type run struct {
	cfg      Config
	id       string // prefixes the run's request ids
	began    time.Time
	db       *gorm.DB
	rdb      *store.Redis
	tp       *topology.Topology
	fleet    *fleet // nil with URL
	url      string // the API
	token    string
	users    []string
	baseID   uint64 // agent_ledger.id before the run
	charged  int64  // requests answered 200 so far: ledger rows to expect
	report   Report
	progress io.Writer
}

// Run measures, then removes what it set up, and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Users = cmp.Or(cfg.Users, UsersDefault)
	cfg.RawMessages = cmp.Or(cfg.RawMessages, RawMessagesDefault)
	cfg.Requests = cmp.Or(cfg.Requests, RequestsDefault)
	cfg.Phase = cmp.Or(cfg.Phase, PhaseDefault)
	cfg.E2EInFlight = cmp.Or(cfg.E2EInFlight, E2EInFlightDefault)
	cfg.Batches = cmp.Or(cfg.Batches, BatchesDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.BatchInFlight = cmp.Or(cfg.BatchInFlight, BatchInFlightDefault)
	cfg.RelayRows = cmp.Or(cfg.RelayRows, RelayRowsDefault)
	cfg.RelayRate = cmp.Or(cfg.RelayRate, RelayRateDefault)
	cfg.RelayLag = cmp.Or(cfg.RelayLag, RelayLagDefault)
	cfg.RelayInterval = cmp.Or(cfg.RelayInterval, RelayIntervalDefault)
	r := &run{cfg: cfg, id: runID(), began: time.Now(), progress: cmp.Or[io.Writer](cfg.Progress, io.Discard)}
	r.report = Report{Started: r.began.UTC(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Fleet: "own"}
	if cfg.URL != "" {
		r.report.Fleet = cfg.URL
	}
	err := r.setUp(ctx)
	if err == nil {
		err = r.measure(ctx)
	}
	err = errors.Join(err, r.tearDown())
	r.report.Seconds = time.Since(r.began).Seconds()
	r.report.Targets = targets(&r.report)
	if err != nil {
		return &r.report, err
	}
	return &r.report, nil
}

func runID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "b" + strconv.FormatInt(time.Now().Unix()%100000, 36) + hex.EncodeToString(b[:])
}

func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(r.progress, "bench [%6.1fs] %s\n", time.Since(r.began).Seconds(), fmt.Sprintf(format, a...))
}

// setUp opens the services, starts the own fleet (or checks the running
// one), and creates the bench's users and model price.
func (r *run) setUp(ctx context.Context) error {
	if r.cfg.URL == "" {
		dir := r.cfg.Dir
		if dir == "" {
			d, err := os.MkdirTemp("", "isle-bench-")
			if err != nil {
				return err
			}
			dir = d
		}
		r.cfg.Dir = dir
		f, err := startFleet(ctx, r, dir)
		if f != nil {
			r.fleet = f
		}
		if err != nil {
			return err
		}
		r.url = f.url
	} else {
		db, err := store.OpenMySQL(r.cfg.MySQL)
		if err != nil {
			return err
		}
		r.db = db
		if r.rdb, err = store.OpenRedis(r.cfg.Redis); err != nil {
			return err
		}
		if r.tp, err = topology.New(r.cfg.Topology); err != nil {
			return err
		}
		r.url = r.cfg.URL
		r.logf("against the running fleet at %s", r.url)
	}
	tok, err := httpapi.MintToken(r.cfg.JWTSecret, "isle-bench", httpapi.RoleService, time.Hour, time.Now())
	if err != nil {
		return fmt.Errorf("bench: token: %w", err)
	}
	r.token = tok
	if err := r.seed(ctx); err != nil {
		return err
	}
	r.baseID, err = store.NewLedger(r.db).LastID(ctx)
	return err
}

// benchModel is the model the bench's requests name, and its price.
const benchModel = "isle-bench-model"

// seed creates the users the requests spread over (a balance no run
// exhausts) and the model's price, where missing.
func (r *run) seed(ctx context.Context) error {
	accounts := store.NewAccounts(r.db)
	opening := decimal.New(1, 9)
	for i := range r.cfg.Users {
		u := fmt.Sprintf("isle-bench-%03d", i)
		r.users = append(r.users, u)
		if _, err := accounts.Create(ctx, u, "", opening); err != nil && !errors.Is(err, store.ErrUserExists) {
			return fmt.Errorf("bench: create user %s: %w", u, err)
		}
	}
	return store.NewPrices(r.db, r.rdb).Set(ctx, store.Pricing{Model: benchModel, Input: decimal.NewFromInt(200),
		CachedInput: decimal.NewFromInt(50), Output: decimal.NewFromInt(800), Reasoning: decimal.NewFromInt(800), Enabled: true})
}

// usage returns the i-th request of a phase: a charge of a few thousand
// tokens to one of the users in turn.
func (r *run) usage(phase string) func(i int64) request {
	header := map[string][]string{"Authorization": {"Bearer " + r.token}, "Content-Type": {"application/json"}}
	url := r.url + "/v1/agent/usage"
	return func(i int64) request {
		body := fmt.Appendf(nil, `{"requestId":"%s-%s-%d","username":"%s","modelName":"%s","inputTokens":%d,"cachedTokens":%d,"outputTokens":%d,"reasoningTokens":0}`,
			r.id, phase, i, r.users[int(i)%len(r.users)], benchModel, 1000+i%500, 200, 300+i%100)
		return request{url: url, header: header, body: body}
	}
}

func (r *run) tearDown() error {
	var errs []error
	if r.fleet != nil {
		errs = append(errs, r.fleet.remove(r.cfg.Keep))
		if r.cfg.Keep {
			r.logf("kept the fleet's database, keys and queues; logs in %s", r.cfg.Dir)
		}
	} else {
		if r.db != nil {
			errs = append(errs, store.CloseMySQL(r.db))
		}
		if r.rdb != nil {
			errs = append(errs, r.rdb.Close())
		}
	}
	return errors.Join(errs...)
}

// measure runs the phases in order.
func (r *run) measure(ctx context.Context) error {
	for _, p := range []struct {
		name string
		run  func(context.Context) error
	}{{"baselines", r.baselines}, {"usage", r.usagePhases}, {"e2e", r.endToEnd}, {"batch", r.batched}, {"tracing", r.tracing}, {"consumer", r.consumerAlone}, {"relay", r.relay}, {"scores", r.scores}} {
		if len(r.cfg.Phases) > 0 && !slices.Contains(r.cfg.Phases, p.name) {
			continue
		}
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	return nil
}
