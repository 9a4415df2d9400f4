package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// The billing path's phases: the raw baselines, the usage API under load,
// end to end to the ledger, and the deduct consumer alone.

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
	b.Limit = compositeLimit(*b)
	r.logf("composite limit of a charge: %.0f charges/s (2 messages %.1f µs + deduct.lua %.1f µs + 2 rows %.1f µs)",
		b.Limit.PerSecond, b.Limit.MessagesUs, b.Limit.DeductUs, b.Limit.RowsUs)
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
	return r.settle(ctx, l.OK)
}

// settle counts ok more charges and waits for the fleet to write their
// ledger rows and empty its queues.
func (r *run) settle(ctx context.Context, ok int64) error {
	r.charged += ok
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
	e, err := r.endToEndAs(ctx, "e2e")
	r.report.EndToEnd = e
	return err
}

// endToEndAs is endToEnd with the requests of phase (their ids are the
// phase's: a second run under another name charges again); it returns the
// figures, which endToEnd reports and the tracing phase compares.
func (r *run) endToEndAs(ctx context.Context, phase string) (EndToEnd, error) {
	e := EndToEnd{InFlight: r.cfg.E2EInFlight}
	meter := startCPU(r.processes())
	began := time.Now()
	l := closedLoop(ctx, e.InFlight, int64(r.cfg.Requests), 10*time.Minute, r.usage(phase))
	if l.OK == 0 {
		return e, fmt.Errorf("bench: end to end: no request succeeded: %s", l.FirstErr)
	}
	r.charged += l.OK
	last, err := r.waitLedger(ctx, r.charged, 5*time.Minute, nil)
	if err != nil {
		return e, err
	}
	if err := r.waitQueuesEmpty(ctx, time.Minute); err != nil {
		return e, err
	}
	e.CPU = meter.stop(l.OK)
	e.Requests, e.Errors = l.OK, l.Errors
	took := last.Sub(began)
	e.Seconds, e.PerSecond = took.Seconds(), float64(l.OK)/took.Seconds()
	e.RatioToRaw, e.RatioToLimit = r.ratios(e.PerSecond)
	r.logf("end to end, %d in flight: %d requests, first request to last ledger row %.0f req/s (%.3f× raw end to end, %.3f× the composite limit); answered at %.0f req/s, p99 %.1f ms",
		e.InFlight, e.Requests, e.PerSecond, e.RatioToRaw, e.RatioToLimit, l.RPS, l.P99ms)
	for _, c := range e.CPU {
		r.logf("  %-8s %.2f cores, %.3f ms CPU per request, peak RSS %d MiB", c.Process, c.Cores, c.MsPerRequest, c.PeakRSSBytes>>20)
	}
	return e, nil
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
	var last int64 = -1
	for {
		n, err := store.NewLedger(r.db).CountEntries(ctx, store.LedgerDeduct, r.id+"-", r.baseID)
		now := time.Now()
		if err != nil {
			return now, fmt.Errorf("bench: %w", err)
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

// The worker's subscribers the consumer phase runs the deduct consumer on
// (WORKER_SUBSCRIBER): Isle's, and watermill-amqp/v3's for comparison.
const (
	subscriberIsle          = "isle"
	subscriberWatermillAMQP = "watermill-amqp"
)

// consumerAlone times the deduct consumer alone draining Requests real
// deductions (queued through the API while the worker was stopped),
// against a bare consumer taking as many deduction messages off the same
// queue; then the same consumer on watermill-amqp's subscriber draining a
// quarter as many (it is much slower).
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

	isle, err := r.drain(ctx, "w", n, subscriberIsle)
	if err != nil {
		return err
	}
	c.Messages, c.Seconds, c.PerSecond, c.WorkerCPUms, c.WorkerPeakRSS = isle.Messages, isle.Seconds, isle.PerSecond, isle.WorkerCPUms, isle.WorkerPeakRSS
	if bare.PerSecond > 0 && multi.PerSecond > 0 {
		c.RatioToBare, c.RatioToMulti = c.PerSecond/bare.PerSecond, c.PerSecond/multi.PerSecond
	}
	r.logf("deduct consumer alone: %.0f msg/s (%.3f× the bare consumer, %.3f× with multi-ack), worker %.3f ms CPU per message",
		c.PerSecond, c.RatioToBare, c.RatioToMulti, c.WorkerCPUms)

	wa, err := r.drain(ctx, "wa", max(100, n/4), subscriberWatermillAMQP)
	if err != nil {
		return err
	}
	if bare.PerSecond > 0 {
		wa.RatioToBare = wa.PerSecond / bare.PerSecond
	}
	if c.PerSecond > 0 {
		wa.RatioToIsle = wa.PerSecond / c.PerSecond
	}
	c.WatermillAMQP = &wa
	r.logf("deduct consumer alone on watermill-amqp (%d deductions): %.0f msg/s (%.3f× the bare consumer, %.3f× on Isle's subscriber), worker %.3f ms CPU per message",
		wa.Queued, wa.PerSecond, wa.RatioToBare, wa.RatioToIsle, wa.WorkerCPUms)

	if err := r.fleet.startWorker(ctx, "all"); err != nil {
		return err
	}
	return r.waitQueuesEmpty(ctx, 2*time.Minute)
}

// drain queues n deductions through the API with the worker stopped
// (requests of phase), starts `worker -handlers agent-billing` on
// subscriber, times it from its first ledger row to its last, and stops it.
func (r *run) drain(ctx context.Context, phase string, n int, subscriber string) (SubscriberRun, error) {
	out := SubscriberRun{Subscriber: subscriber}
	l := closedLoop(ctx, E2EInFlightDefault, int64(n), 10*time.Minute, r.usage(phase))
	if l.OK == 0 {
		return out, fmt.Errorf("bench: queue deductions: no request succeeded: %s", l.FirstErr)
	}
	r.charged += l.OK
	out.Queued = l.OK
	r.logf("queued %d deductions through the API with the worker stopped", l.OK)
	if err := r.fleet.startWorker(ctx, topology.DomainAgentBilling, "WORKER_SUBSCRIBER="+subscriber); err != nil {
		return out, err
	}
	if got := r.fleet.worker.field("subscriber"); got != subscriber {
		return out, fmt.Errorf("bench: the worker says it consumes through %q, not %q (an older worker binary? go build -o bin/ ./cmd/...)", got, subscriber)
	}
	meter := startCPU(r.fleet.processes())
	began, from := time.Now(), r.charged-l.OK
	last, err := r.waitLedger(ctx, r.charged, 5*time.Minute, func(t time.Time, seen int64) { began, from = t, seen })
	if err != nil {
		return out, err
	}
	cpu := meter.stop(r.charged - from)
	out.Messages = r.charged - from
	out.Seconds = last.Sub(began).Seconds()
	if out.Seconds > 0 {
		out.PerSecond = float64(out.Messages) / out.Seconds
	}
	for _, p := range cpu {
		if p.Process == "worker" {
			out.WorkerCPUms, out.WorkerPeakRSS = p.MsPerRequest, p.PeakRSSBytes
		}
	}
	return out, r.fleet.stopWorker()
}
