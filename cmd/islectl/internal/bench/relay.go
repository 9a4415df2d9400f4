package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"gorm.io/gorm"
)

// Defaults of the relay phase's Config fields.
const (
	RelayRowsDefault     = 20_000
	RelayRateDefault     = 1_000
	RelayLagDefault      = 10 * time.Second
	RelayIntervalDefault = 3 * time.Second // the Spring backend's, beside the relay's own default
)

// The relay phase's settings.
const (
	// relayDomain is the domain of the bench's outbox rows: payment
	// receipts are what the outbox was built for (the notify consumer
	// writes its receipt message in the payment's transaction). The worker
	// consumes their queue, so the phase stops it: the bench alone reads
	// the queue, and no receipt of a made-up order reaches a mailer.
	relayDomain = topology.DomainPaymentReceipt
	// relayWriteBatch is the rows per transaction of the burst, written by
	// relayWriters goroutines; the lag's rows are one per transaction.
	relayWriteBatch = 500
	relayWriters    = 8
	// relayLagWriters are the goroutines that insert the lag's rows as their
	// times come: enough that a slow commit does not delay the next row.
	relayLagWriters = 32
	// goalRelayLagP99 is the lag the outbox relay is to keep at 1,000 rows/s.
	goalRelayLagP99 = 200.0 // ms
)

// Relay is the outbox relay: draining a backlog, and the lag of rows
// written at a fixed rate, each in its own transaction.
type Relay struct {
	Skipped string     `json:"skipped,omitempty"`
	Domain  string     `json:"domain,omitempty"` // the outbox rows' topology domain
	Drain   RelayDrain `json:"drain"`
	Lag     []RelayLag `json:"lag"` // at the relay's default interval, then at a short one
}

// RelayDrain is the relay publishing a backlog of rows written while it was
// stopped: from the first row it published to the last.
type RelayDrain struct {
	Rows               int64        `json:"rows"`
	Seconds            float64      `json:"seconds"`
	PerSecond          float64      `json:"per_second"`           // rows published (confirmed and marked) per second
	RatioToRawPublish  float64      `json:"ratio_to_raw_publish"` // ÷ the raw publisher with a confirm window
	WritePerSecond     float64      `json:"write_per_second"`     // the backlog's writing, for scale
	IntervalMs         float64      `json:"interval_ms"`          // the relay's poll interval
	CPU                []ProcessCPU `json:"cpu"`                  // MsPerRequest is per row
	BatchSize          int          `json:"batch_size"`           // rows per claim, the relay's default
	FirstPublishedRows int64        `json:"first_published_rows"` // the first batch's, before the timing began
}

// RelayLag is one run of rows inserted at a fixed rate: each row's lag is
// the time from its transaction's commit to its message's delivery to a
// consumer of the queue (claim, publish, confirm, mark and delivery).
type RelayLag struct {
	IntervalMs float64      `json:"interval_ms"` // the relay's poll interval in this run
	Default    bool         `json:"default"`     // the relay's default interval
	TargetRPS  float64      `json:"target_rps"`
	Rows       int64        `json:"rows"`       // inserted and committed
	InsertRPS  float64      `json:"insert_rps"` // the rate they were committed at
	Delivered  int64        `json:"delivered"`  // their messages delivered (each counted once)
	Duplicates int64        `json:"duplicates"` // deliveries of a row already delivered
	Seconds    float64      `json:"seconds"`    // of inserting
	P50ms      float64      `json:"p50_ms"`
	P99ms      float64      `json:"p99_ms"`
	P999ms     float64      `json:"p999_ms"`
	MaxMs      float64      `json:"max_ms"`
	CPU        []ProcessCPU `json:"cpu"` // MsPerRequest is per row; from the first insert to the last delivery
}

// relayRows names the rows of one part of the phase: their message keys and
// order numbers are tag's, with the row's number after it.
type relayRows struct {
	r   *run
	d   topology.Domain
	tag string
}

func (rr relayRows) key(i int) string { return rr.r.id + "-" + rr.tag + "-" + strconv.Itoa(i) }

// enqueue writes row i into the outbox inside tx, as a business
// transaction does (store.EnqueueMessage).
func (rr relayRows) enqueue(tx *gorm.DB, i int) error {
	amount := int32(100 + i%9900)
	m := topology.PaymentReceiptDispatch{
		TraceID: rr.key(i), Email: fmt.Sprintf("isle-bench-%03d@example.com", i%200), OutTradeNo: rr.key(i),
		Channel: "ALIPAY", TransactionID: "2025" + strconv.Itoa(1_000_000_000+i), AmountFen: &amount, Currency: "CNY",
		ProductCode: "isle-bench-credits", PaidAt: topology.LocalDateTime{Time: time.Now()},
	}
	e, err := store.EnqueueMessage(tx, rr.d, m, "isle-bench:"+rr.key(i), rr.key(i), 0)
	if err == nil && !e.Added {
		err = fmt.Errorf("bench: outbox row %s was there already", rr.key(i))
	}
	return err
}

// index is the row number of a delivered message of these rows, or -1.
func (rr relayRows) index(body []byte) int {
	var m struct {
		OutTradeNo string `json:"outTradeNo"`
	}
	if json.Unmarshal(body, &m) != nil {
		return -1
	}
	n, ok := strings.CutPrefix(m.OutTradeNo, rr.r.id+"-"+rr.tag+"-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(n)
	if err != nil {
		return -1
	}
	return i
}

// relay measures the outbox relay of the own fleet: the rows/s it drains a
// backlog at, against the raw publisher, then the lag at a fixed rate at
// its default interval and at a short one.
func (r *run) relay(ctx context.Context) (err error) {
	rep := &r.report.Relay
	if r.fleet == nil {
		rep.Skipped = "needs the bench's own fleet: it stops and starts the relay and the worker"
		r.logf("outbox relay: skipped (%s)", rep.Skipped)
		return nil
	}
	if err := r.fleet.stopWorker(); err != nil {
		return err
	}
	defer func() { err = cmp.Or(err, r.fleet.startWorker(ctx, "all")) }()
	d, ok := r.tp.Domain(relayDomain)
	if !ok {
		return fmt.Errorf("bench: the topology has no domain %s", relayDomain)
	}
	rep.Domain = d.Name
	if err := r.rawPublishBaseline(ctx); err != nil {
		return err
	}
	conn, err := amqp.Dial(r.cfg.AMQPURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := emptyUnconsumed(conn, d.Queue); err != nil {
		return err
	}
	if err := r.relayDrain(ctx, d); err != nil {
		return err
	}
	if err := emptyUnconsumed(conn, d.Queue); err != nil {
		return err
	}
	for _, interval := range []time.Duration{0, r.cfg.RelayInterval} {
		if interval > 0 && interval == r.fleet.relayInterval() {
			break // the default run measured it
		}
		if interval > 0 || r.fleet.relay == nil {
			if err := r.fleet.stopRelay(); err != nil {
				return err
			}
			if err := r.fleet.startRelay(ctx, interval); err != nil {
				return err
			}
		}
		l, err := r.relayLag(ctx, conn, d, interval == 0, len(rep.Lag))
		if err != nil {
			return err
		}
		rep.Lag = append(rep.Lag, l)
	}
	return nil
}

// rawPublishBaseline takes the raw publish baseline the relay's rate is
// compared with, unless the baselines phase took it in this run.
func (r *run) rawPublishBaseline(ctx context.Context) error {
	b := &r.report.Baselines
	if b.RawPublish.PerSecond > 0 {
		return nil
	}
	q := r.rawQueue()
	if err := declareRawQueue(r.cfg.AMQPURL, q); err != nil {
		return fmt.Errorf("bench: declare %s: %w", q, err)
	}
	defer func() { _ = deleteQueues(r.cfg.AMQPURL, q) }()
	took, err := rawPublish(ctx, r.cfg.AMQPURL, "", q, r.cfg.RawMessages, r.rawBody)
	if err != nil {
		return fmt.Errorf("bench: raw publish: %w", err)
	}
	b.RawPublish = rateOf(int64(r.cfg.RawMessages), took)
	r.logf("raw RabbitMQ publish, confirm window %d: %.0f msg/s (the relay's baseline)", rawConfirmWindow, b.RawPublish.PerSecond)
	return nil
}

// emptyUnconsumed purges queue, after checking nothing else consumes it.
func emptyUnconsumed(conn *amqp.Connection, queue string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", queue, err)
	}
	if q.Consumers > 0 {
		return fmt.Errorf("bench: %s has %d consumers: the relay phase must be its only reader", queue, q.Consumers)
	}
	_, err = ch.QueuePurge(queue, false)
	return err
}

// relayDrain stops the relay, writes RelayRows outbox rows, starts the
// relay (its defaults) and times it from the first row it published to the
// last; the CPU of the relay, MariaDB and RabbitMQ is per row.
func (r *run) relayDrain(ctx context.Context, d topology.Domain) error {
	dr := &r.report.Relay.Drain
	if err := r.fleet.stopRelay(); err != nil {
		return err
	}
	n := r.cfg.RelayRows
	rows := relayRows{r: r, d: d, tag: "drain"}
	began := time.Now()
	if err := writeBurst(ctx, r.db, n, rows.enqueue); err != nil {
		return err
	}
	dr.WritePerSecond = float64(n) / time.Since(began).Seconds()
	r.logf("outbox relay: wrote %d %s rows with the relay stopped (%.0f rows/s, %d per transaction)", n, d.Name, dr.WritePerSecond, relayWriteBatch)
	if err := r.fleet.startRelay(ctx, 0); err != nil {
		return err
	}
	dr.IntervalMs = ms(r.fleet.relayInterval())
	dr.BatchSize = int(r.fleet.relay.number("batch"))
	meter := startCPU(r.relayProcesses())
	// The bench's database holds no other outbox rows: the rows left are
	// the backlog's. Each probe reads one entry of the claim index.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		left, err := store.NewOutbox(r.db).Pending(ctx, "outbox")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if !left {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the relay left outbox rows unpublished 5 minutes after it started; its log: %s", r.fleet.relay.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	dr.CPU = meter.stop(int64(n))
	// Timed on the database's clock, from the first batch's mark to the
	// last's: the rows after the first batch over that time. A mark sets
	// one NOW(6) for every row of its batch.
	span, err := store.NewOutbox(r.db).PublishedSpan(ctx)
	if err != nil {
		return fmt.Errorf("bench: time the drain: %w", err)
	}
	if span.Rows != int64(n) {
		return fmt.Errorf("bench: the outbox holds %d rows, not the %d written", span.Rows, n)
	}
	dr.Rows, dr.FirstPublishedRows = span.Rows, span.First
	dr.Seconds = span.Span.Seconds()
	if span.Span > 0 {
		dr.PerSecond = float64(span.Rows-span.First) / dr.Seconds
	}
	if raw := r.report.Baselines.RawPublish.PerSecond; raw > 0 {
		dr.RatioToRawPublish = dr.PerSecond / raw
	}
	r.logf("outbox relay drain: %d rows at %.0f rows/s (%.3f× raw publish), batch %d, interval %s", n, dr.PerSecond, dr.RatioToRawPublish,
		dr.BatchSize, r.fleet.relayInterval())
	r.logCPU(dr.CPU, "row")
	return nil
}

// writeBurst writes n rows with relayWriters goroutines, relayWriteBatch
// rows per transaction.
func writeBurst(ctx context.Context, db *gorm.DB, n int, write func(tx *gorm.DB, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, relayWriters)
	for w := range relayWriters {
		wg.Go(func() {
			for {
				from := int(next.Add(relayWriteBatch)) - relayWriteBatch
				if from >= n || ctx.Err() != nil {
					return
				}
				err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					for i := from; i < min(n, from+relayWriteBatch); i++ {
						if err := write(tx, i); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return cmp.Or(ctx.Err(), errors.Join(errs...))
}
