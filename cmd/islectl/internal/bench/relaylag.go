package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"gorm.io/gorm"
)

// The relay phase's lag runs: rows at a fixed rate, each timed from its
// commit to its message's delivery.

// relayLag inserts rows at RelayRate for RelayLag, each in a transaction of
// its own, while a consumer of the queue takes their messages, and records
// each row's time from commit to delivery.
func (r *run) relayLag(ctx context.Context, conn *amqp.Connection, d topology.Domain, isDefault bool, k int) (RelayLag, error) {
	interval := r.fleet.relayInterval()
	l := RelayLag{IntervalMs: ms(interval), Default: isDefault, TargetRPS: float64(r.cfg.RelayRate)}
	n := max(1, int(float64(r.cfg.RelayRate)*r.cfg.RelayLag.Seconds()))
	rows := relayRows{r: r, d: d, tag: "lag" + strconv.Itoa(k)}
	committed := make([]atomic.Int64, n) // unix nanoseconds; 0: not committed
	delivered := make([]atomic.Int64, n)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := conn.Channel()
	if err != nil {
		return l, err
	}
	defer ch.Close()
	// Auto-ack: the bench only notes when each message arrives.
	deliveries, err := ch.ConsumeWithContext(ctx, d.Queue, "", true, false, false, false, nil)
	if err != nil {
		return l, err
	}
	var got, dups atomic.Int64
	allIn := make(chan struct{})
	consumed := make(chan error, 1)
	go func() {
		for m := range deliveries {
			now := time.Now().UnixNano()
			if i := rows.index(m.Body); i >= 0 && i < n {
				if delivered[i].CompareAndSwap(0, now) {
					if got.Add(1) == int64(n) {
						close(allIn)
					}
				} else {
					dups.Add(1)
				}
			}
		}
		consumed <- errors.New("the delivery channel closed")
	}()

	meter := startCPU(r.relayProcesses())
	began := time.Now()
	todo := make(chan int, relayLagWriters)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range relayLagWriters {
		wg.Go(func() {
			for i := range todo {
				err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return rows.enqueue(tx, i) })
				if err != nil {
					failed.CompareAndSwap(nil, err)
					continue
				}
				committed[i].Store(time.Now().UnixNano())
			}
		})
	}
	every := time.Second / time.Duration(r.cfg.RelayRate)
	for i := range n {
		if wait := time.Until(began.Add(time.Duration(i) * every)); wait > 0 {
			time.Sleep(wait)
		}
		if ctx.Err() != nil {
			break
		}
		todo <- i
	}
	close(todo)
	wg.Wait()
	inserted := time.Since(began)
	if err, _ := failed.Load().(error); err != nil {
		return l, fmt.Errorf("bench: insert an outbox row: %w", err)
	}
	l.Rows, l.Seconds = int64(n), inserted.Seconds()
	l.InsertRPS = float64(n) / inserted.Seconds()

	wait := 2*interval + time.Minute
	select {
	case <-allIn:
	case err := <-consumed:
		return l, fmt.Errorf("bench: the consumer of %s stopped after %d of %d messages: %v", d.Queue, got.Load(), n, err)
	case <-time.After(wait):
		return l, fmt.Errorf("bench: %d of %d outbox messages delivered %s after the last insert; the relay's log: %s", got.Load(), n, wait, r.fleet.relay.log)
	case <-ctx.Done():
		return l, ctx.Err()
	}
	l.CPU = meter.stop(int64(n))
	h := newHistogram()
	for i := range n {
		_ = h.RecordValue(max(0, delivered[i].Load()-committed[i].Load()) / int64(time.Microsecond))
	}
	l.Delivered, l.Duplicates = got.Load(), dups.Load()
	l.P50ms, l.P99ms, l.P999ms, l.MaxMs = float64(h.ValueAtQuantile(50))/1000, float64(h.ValueAtQuantile(99))/1000,
		float64(h.ValueAtQuantile(99.9))/1000, float64(h.Max())/1000
	which := "short"
	if isDefault {
		which = "default"
	}
	r.logf("outbox relay lag at %d rows/s (%.0f inserted/s), %s interval %s: commit to delivery p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		r.cfg.RelayRate, l.InsertRPS, which, interval, l.P50ms, l.P99ms, l.MaxMs)
	r.logCPU(l.CPU, "row")
	cancel()
	<-consumed //nolint:errcheck // ended by the cancel above: the reason is known
	return l, nil
}

// relayProcesses are the processes the relay's rows cost CPU in: the relay,
// MariaDB and RabbitMQ, and the bench, which writes and consumes them.
func (r *run) relayProcesses() []process {
	var out []process
	for _, p := range r.processes() {
		if p.Name != "api" && p.Name != "worker" && p.Name != "redis" {
			out = append(out, p)
		}
	}
	return out
}

func (r *run) logCPU(cpu []ProcessCPU, per string) {
	for _, c := range cpu {
		r.logf("  %-8s %.2f cores, %.3f ms CPU per %s, peak RSS %d MiB", c.Process, c.Cores, c.MsPerRequest, per, c.PeakRSSBytes>>20)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
