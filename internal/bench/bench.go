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

	"github.com/eisland/isle/internal/httpapi"
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
var Phases = []string{"baselines", "usage", "e2e", "consumer", "relay"}

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
	// The billing queue's deduction messages taken by a consumer that only
	// acks (own fleet): each message on its own, as doc/money.md's "bare
	// consumer" (the consumer goal's measure), and with multi-ack.
	BareConsumer         Rate `json:"bare_consumer"`
	BareConsumerMultiAck Rate `json:"bare_consumer_multi_ack"`
}

// EndToEnd is the path from the first usage request to the last ledger row.
type EndToEnd struct {
	InFlight   int          `json:"inflight"`
	Requests   int64        `json:"requests"` // answered 200
	Errors     int64        `json:"errors"`
	Seconds    float64      `json:"seconds"` // first request to last ledger row
	PerSecond  float64      `json:"per_second"`
	RatioToRaw float64      `json:"ratio_to_raw_end_to_end"`
	CPU        []ProcessCPU `json:"cpu"` // until the fleet had done every request's work
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
}

// Target is one of issue 10's goals, checked on this run's figures.
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
	Consumer  Consumer  `json:"consumer"`
	Relay     Relay     `json:"relay"`
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
	return r.db.WithContext(ctx).Raw("SELECT COALESCE(MAX(id), 0) FROM agent_ledger").Scan(&r.baseID).Error
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
	}{{"baselines", r.baselines}, {"usage", r.usagePhases}, {"e2e", r.endToEnd}, {"consumer", r.consumerAlone}, {"relay", r.relay}} {
		if len(r.cfg.Phases) > 0 && !slices.Contains(r.cfg.Phases, p.name) {
			continue
		}
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// queue names the baselines' own queue.
func (r *run) rawQueue() string { return r.tp.Prefix() + ".isle-bench.raw." + r.id }

// rawBody is a message the size of a deduction's.
func (r *run) rawBody(i int) []byte {
	return fmt.Appendf(nil, `{"deductionId":"%s-raw-%d","username":"isle-bench-%03d","amountFen":"0.30000000","modelName":"%s","inputTokens":1200,"outputTokens":350,"pendingRef":"0123456789abcdef","requestHash":"fedcba9876543210"}`,
		r.id, i, i%200, benchModel)
}

func (r *run) baselines(ctx context.Context) error {
	b := &r.report.Baselines
	q := r.rawQueue()
	if err := declareRawQueue(r.cfg.AMQPURL, q); err != nil {
		return fmt.Errorf("bench: declare %s: %w", q, err)
	}
	defer func() { _ = deleteQueues(r.cfg.AMQPURL, q) }()
	n := r.cfg.RawMessages
	took, err := rawPublish(ctx, r.cfg.AMQPURL, "", q, n, r.rawBody)
	if err != nil {
		return fmt.Errorf("bench: raw publish: %w", err)
	}
	b.RawPublish = rateOf(int64(n), took)
	r.logf("raw RabbitMQ publish, confirm window %d: %.0f msg/s", rawConfirmWindow, b.RawPublish.PerSecond)
	if took, err = rawConsume(ctx, r.cfg.AMQPURL, q, n, rawAckEvery, time.Time{}); err != nil {
		return fmt.Errorf("bench: raw consume: %w", err)
	}
	b.RawConsume = rateOf(int64(n), took)
	r.logf("raw RabbitMQ consume, prefetch %d, multi-ack: %.0f msg/s", rawPrefetch, b.RawConsume.PerSecond)
	if took, err = rawEndToEnd(ctx, r.cfg.AMQPURL, q, n, r.rawBody); err != nil {
		return fmt.Errorf("bench: raw end to end: %w", err)
	}
	b.RawEndToEnd = rateOf(int64(n), took)
	r.logf("raw RabbitMQ end to end: %.0f msg/s", b.RawEndToEnd.PerSecond)
	if b.RedisDeduct, err = redisDeduct(ctx, r.cfg.Redis, r.cfg.Phase/2); err != nil {
		return fmt.Errorf("bench: redis baseline: %w", err)
	}
	r.logf("Redis deduct.lua, %d goroutines: %.0f calls/s", redisGoroutines, b.RedisDeduct.PerSecond)
	if b.MySQLBatch, err = mysqlBatch(ctx, r.db, r.cfg.RawMessages); err != nil {
		return fmt.Errorf("bench: MySQL baseline: %w", err)
	}
	r.logf("MySQL batched insert, %d rows per statement: %.0f rows/s", mysqlBatchRows, b.MySQLBatch.PerSecond)
	return nil
}

// usagePhases load the usage API closed-loop at 1, 32 and 128 requests in
// flight, then at a fixed rate of half what 32 in flight reached; the
// fleet catches up between phases.
func (r *run) usagePhases(ctx context.Context) error {
	var at32 float64
	for _, inflight := range []int{1, 32, 128} {
		l := closedLoop(ctx, inflight, 0, r.cfg.Phase, r.usage("c"+strconv.Itoa(inflight)))
		if err := r.took(ctx, l); err != nil {
			return err
		}
		if inflight == 32 {
			at32 = l.RPS
		}
	}
	rate := max(10, int(at32/2))
	l := fixedRate(ctx, rate, r.cfg.Phase, r.usage("r"))
	return r.took(ctx, l)
}

// took records a load phase and waits for the fleet to write its ledger rows.
func (r *run) took(ctx context.Context, l Load) error {
	r.report.Usage = append(r.report.Usage, l)
	what := fmt.Sprintf("%d in flight", l.InFlight)
	if l.Mode == "rate" {
		what = fmt.Sprintf("fixed rate %.0f/s", l.TargetRPS)
	}
	r.logf("usage API, %s: %.0f req/s, p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, %d errors", what, l.RPS, l.P50ms, l.P99ms, l.P999ms, l.Errors)
	if l.Errors > 0 {
		r.logf("  first error: %s", l.FirstErr)
	}
	if l.OK == 0 {
		return fmt.Errorf("bench: usage API, %s: no request succeeded: %s", what, l.FirstErr)
	}
	r.charged += l.OK
	_, err := r.waitLedger(ctx, r.charged, 2*time.Minute, nil)
	if err == nil {
		err = r.waitQueuesEmpty(ctx, time.Minute)
	}
	return err
}

// endToEnd sends Requests usage requests and times them from the first
// request to the last ledger row; the CPU of every process is read until the
// fleet has done all their work (usage statistics included).
func (r *run) endToEnd(ctx context.Context) error {
	e := &r.report.EndToEnd
	e.InFlight = r.cfg.E2EInFlight
	meter := startCPU(r.processes())
	began := time.Now()
	l := closedLoop(ctx, e.InFlight, int64(r.cfg.Requests), 10*time.Minute, r.usage("e2e"))
	if l.OK == 0 {
		return fmt.Errorf("bench: end to end: no request succeeded: %s", l.FirstErr)
	}
	r.charged += l.OK
	last, err := r.waitLedger(ctx, r.charged, 5*time.Minute, nil)
	if err != nil {
		return err
	}
	if err := r.waitQueuesEmpty(ctx, time.Minute); err != nil {
		return err
	}
	e.CPU = meter.stop(l.OK)
	e.Requests, e.Errors = l.OK, l.Errors
	took := last.Sub(began)
	e.Seconds, e.PerSecond = took.Seconds(), float64(l.OK)/took.Seconds()
	if raw := r.report.Baselines.RawEndToEnd.PerSecond; raw > 0 {
		e.RatioToRaw = e.PerSecond / raw
	}
	r.logf("end to end, %d in flight: %d requests, first request to last ledger row %.0f req/s (%.3f× raw end to end); answered at %.0f req/s, p99 %.1f ms",
		e.InFlight, e.Requests, e.PerSecond, e.RatioToRaw, l.RPS, l.P99ms)
	for _, c := range e.CPU {
		r.logf("  %-8s %.2f cores, %.3f ms CPU per request, peak RSS %d MiB", c.Process, c.Cores, c.MsPerRequest, c.PeakRSSBytes>>20)
	}
	return nil
}

// processes are the fleet's and the services' processes, and the bench's own.
func (r *run) processes() []process {
	procs := append(serviceProcesses(), process{Name: "bench", PID: os.Getpid()})
	if r.fleet != nil {
		return append(procs, r.fleet.processes()...)
	}
	return append(procs, findProcesses(map[string]string{"api": "api", "worker": "worker", "relay": "relay"})...)
}

// waitLedger waits until the run's DEDUCT rows number want and returns when
// it saw them; first, when not nil, is told the time the first new row was
// seen and how many there were then.
func (r *run) waitLedger(ctx context.Context, want int64, timeout time.Duration, first func(time.Time, int64)) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	pattern := r.id + "-%"
	var last int64 = -1
	for {
		var n int64
		err := r.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM agent_ledger WHERE id > ? AND kind = ? AND entry_id LIKE ?",
			r.baseID, store.LedgerDeduct, pattern).Scan(&n).Error
		now := time.Now()
		if err != nil {
			return now, fmt.Errorf("bench: count ledger rows: %w", err)
		}
		if first != nil && last >= 0 && n > last {
			first(now, n)
			first = nil
		}
		last = n
		if n >= want {
			return now, nil
		}
		if now.After(deadline) {
			return now, fmt.Errorf("bench: the ledger has %d of %d rows after %s (is the worker running? its log is in %s)", n, want, timeout, r.cfg.Dir)
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// consumerAlone times the deduct consumer alone draining Requests real
// deductions (queued through the API while the worker was stopped),
// against a bare consumer taking as many deduction messages off the same
// queue.
func (r *run) consumerAlone(ctx context.Context) error {
	c := &r.report.Consumer
	if r.fleet == nil {
		c.Skipped = "needs the bench's own fleet: it stops and starts the worker"
		r.logf("deduct consumer alone: skipped (%s)", c.Skipped)
		return nil
	}
	d, _ := r.tp.Domain(topology.DomainAgentBilling)
	n := r.cfg.Requests
	if err := r.fleet.stopWorker(); err != nil {
		return err
	}
	bare, multi := &r.report.Baselines.BareConsumer, &r.report.Baselines.BareConsumerMultiAck
	for _, b := range []struct {
		rate     *Rate
		ackEvery int
		what     string
	}{{bare, 1, "an ack per message"}, {multi, rawAckEvery, "multi-ack"}} {
		if _, err := rawPublish(ctx, r.cfg.AMQPURL, d.Exchange, d.RoutingKey, n, r.rawBody); err != nil {
			return fmt.Errorf("bench: fill %s: %w", d.Queue, err)
		}
		took, err := rawConsume(ctx, r.cfg.AMQPURL, d.Queue, n, b.ackEvery, time.Time{})
		if err != nil {
			return fmt.Errorf("bench: bare consumer: %w", err)
		}
		*b.rate = rateOf(int64(n), took)
		r.logf("bare consumer on %s, prefetch %d, %s: %.0f msg/s", d.Queue, rawPrefetch, b.what, b.rate.PerSecond)
	}

	l := closedLoop(ctx, E2EInFlightDefault, int64(n), 10*time.Minute, r.usage("w"))
	if l.OK == 0 {
		return fmt.Errorf("bench: queue deductions: no request succeeded: %s", l.FirstErr)
	}
	r.charged += l.OK
	r.logf("queued %d deductions through the API with the worker stopped", l.OK)
	if err := r.fleet.startWorker(ctx, topology.DomainAgentBilling); err != nil {
		return err
	}
	meter := startCPU(r.fleet.processes())
	began, from := time.Now(), r.charged-l.OK
	last, err := r.waitLedger(ctx, r.charged, 5*time.Minute, func(t time.Time, seen int64) { began, from = t, seen })
	if err != nil {
		return err
	}
	cpu := meter.stop(r.charged - from)
	c.Messages = r.charged - from
	c.Seconds = last.Sub(began).Seconds()
	if c.Seconds > 0 {
		c.PerSecond = float64(c.Messages) / c.Seconds
	}
	if bare.PerSecond > 0 && multi.PerSecond > 0 {
		c.RatioToBare, c.RatioToMulti = c.PerSecond/bare.PerSecond, c.PerSecond/multi.PerSecond
	}
	for _, p := range cpu {
		if p.Process == "worker" {
			c.WorkerCPUms, c.WorkerPeakRSS = p.MsPerRequest, p.PeakRSSBytes
		}
	}
	r.logf("deduct consumer alone: %.0f msg/s (%.3f× the bare consumer, %.3f× with multi-ack), worker %.3f ms CPU per message",
		c.PerSecond, c.RatioToBare, c.RatioToMulti, c.WorkerCPUms)
	if err := r.fleet.stopWorker(); err != nil {
		return err
	}
	if err := r.fleet.startWorker(ctx, "all"); err != nil {
		return err
	}
	return r.waitQueuesEmpty(ctx, 2*time.Minute)
}
