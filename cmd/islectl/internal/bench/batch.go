package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The batch phase: usage sent to POST /v1/agent/usage/batch, a batch of
// BatchSize charges at a time, BatchInFlight batches in flight; and the
// composite limit every end-to-end figure is compared with.

// CompositeLimit is the most charges a second the parts of a charge allow,
// each at the speed of its raw baseline in the same run: two persistent
// messages (the usage and the deduction) at raw RabbitMQ end-to-end speed,
// one deduct.lua through go-redis, and two rows (the ledger's and the
// usage event's) in 100-row INSERTs. Isle does more than these parts (HTTP,
// the token and ban checks, the worker's transactions), so a figure's
// ratio to it says how much of a charge's cost is what Isle adds.
type CompositeLimit struct {
	MessagesUs  float64 `json:"messages_us"` // 2 ÷ raw end-to-end msg/s, in µs
	DeductUs    float64 `json:"deduct_us"`   // 1 ÷ deduct.lua calls/s
	RowsUs      float64 `json:"rows_us"`     // 2 ÷ MySQL rows/s
	UsPerCharge float64 `json:"us_per_charge"`
	PerSecond   float64 `json:"per_second"` // 1 ÷ UsPerCharge: charges/s
}

// compositeLimit is the composite limit of b's baselines; zero unless the
// three it is made of were measured.
func compositeLimit(b Baselines) CompositeLimit {
	e2e, redis, mysql := b.RawEndToEnd.PerSecond, b.RedisDeduct.PerSecond, b.MySQLBatch.PerSecond
	if e2e <= 0 || redis <= 0 || mysql <= 0 {
		return CompositeLimit{}
	}
	l := CompositeLimit{MessagesUs: 2e6 / e2e, DeductUs: 1e6 / redis, RowsUs: 2e6 / mysql}
	l.UsPerCharge = l.MessagesUs + l.DeductUs + l.RowsUs
	l.PerSecond = 1e6 / l.UsPerCharge
	return l
}

// ratios are an end-to-end rate (charges or submissions a second) ÷ raw
// RabbitMQ end to end and ÷ the composite limit of a charge; 0 for a
// baseline this run did not measure.
func (r *run) ratios(perSecond float64) (toRaw, toLimit float64) {
	b := r.report.Baselines
	if raw := b.RawEndToEnd.PerSecond; raw > 0 {
		toRaw = perSecond / raw
	}
	if lim := b.Limit.PerSecond; lim > 0 {
		toLimit = perSecond / lim
	}
	return toRaw, toLimit
}

// Batched is the batch phase: Charges usage charges sent as Batches batches
// of Size, InFlight at a time, timed from the first batch sent to the last
// ledger row.
type Batched struct {
	Skipped      string       `json:"skipped,omitempty"`
	Size         int          `json:"batch_size"`
	InFlight     int          `json:"inflight"` // batches in flight
	Batches      int64        `json:"batches"`
	Charges      int64        `json:"charges"` // items answered 200
	Errors       int64        `json:"errors"`  // items answered otherwise, or in a batch not answered
	FirstErr     string       `json:"first_error,omitempty"`
	Seconds      float64      `json:"seconds"`    // first batch to last ledger row
	PerSecond    float64      `json:"per_second"` // charges
	RatioToRaw   float64      `json:"ratio_to_raw_end_to_end"`
	RatioToLimit float64      `json:"ratio_to_composite_limit"`
	AnsweredRPS  float64      `json:"answered_per_second"` // charges answered 200 a second, the API alone
	P50ms        float64      `json:"p50_ms"`              // a batch's answer
	P99ms        float64      `json:"p99_ms"`
	P999ms       float64      `json:"p999_ms"`
	MaxMs        float64      `json:"max_ms"`
	CPU          []ProcessCPU `json:"cpu"` // MsPerRequest is per charge, until the fleet had done all their work
}

// batched sends Batches batches of BatchSize charges, BatchInFlight at a
// time, and times them from the first batch to the last ledger row; the
// CPU of every process is read until the fleet has done all their work.
func (r *run) batched(ctx context.Context) error {
	b := &r.report.Batched
	b.Size, b.InFlight = r.cfg.BatchSize, r.cfg.BatchInFlight
	if found, err := r.hasBatches(ctx); err != nil {
		return err
	} else if !found {
		b.Skipped = "the api has no POST /v1/agent/usage/batch (a build before it, with -bin?)"
		r.logf("batches: skipped: %s", b.Skipped)
		return nil
	}
	meter := startCPU(r.processes())
	began := time.Now()
	l := closedLoop(ctx, b.InFlight, int64(r.cfg.Batches), 10*time.Minute, r.usageBatch("batch", b.Size))
	if l.OK == 0 {
		return fmt.Errorf("bench: batches: no charge succeeded: %s", l.FirstErr)
	}
	r.charged += l.OK
	last, err := r.waitLedger(ctx, r.charged, 5*time.Minute, nil)
	if err != nil {
		return err
	}
	if err := r.waitQueuesEmpty(ctx, time.Minute); err != nil {
		return err
	}
	b.CPU = meter.stop(l.OK)
	b.Batches, b.Charges, b.Errors, b.FirstErr = l.Batches, l.OK, l.Errors, l.FirstErr
	b.AnsweredRPS, b.P50ms, b.P99ms, b.P999ms, b.MaxMs = l.RPS, l.P50ms, l.P99ms, l.P999ms, l.MaxMs
	took := last.Sub(began)
	b.Seconds, b.PerSecond = took.Seconds(), float64(l.OK)/took.Seconds()
	b.RatioToRaw, b.RatioToLimit = r.ratios(b.PerSecond)
	r.logf("batches of %d, %d in flight: %d charges in %d batches, first batch to last ledger row %.0f charges/s (%.3f× raw end to end, %.3f× the composite limit); answered at %.0f charges/s, batch p50 %.1f ms, p99 %.1f ms, %d errors",
		b.Size, b.InFlight, b.Charges, b.Batches, b.PerSecond, b.RatioToRaw, b.RatioToLimit, b.AnsweredRPS, b.P50ms, b.P99ms, b.Errors)
	if b.Errors > 0 {
		r.logf("  first error: %s", b.FirstErr)
	}
	for _, c := range b.CPU {
		r.logf("  %-8s %.2f cores, %.3f ms CPU per charge, peak RSS %d MiB", c.Process, c.Cores, c.MsPerRequest, c.PeakRSSBytes>>20)
	}
	return nil
}

// hasBatches asks the api whether it takes batches, with an empty one.
func (r *run) hasBatches(ctx context.Context) (bool, error) {
	c := client(1)
	defer c.CloseIdleConnections()
	_, err := post(ctx, c, r.usageBatch("probe", 0)(1))
	var se *statusError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &se) && se.status == http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("bench: an empty batch: %w", err)
	}
}

// usageBatch returns the i-th batch of a phase (from 1): size charges like
// usage's, whose request ids number the charges of the phase in order, to
// the users in turn.
func (r *run) usageBatch(phase string, size int) func(i int64) request {
	header := http.Header{"Authorization": {"Bearer " + r.token}, "Content-Type": {"application/json"}}
	url := r.url + "/v1/agent/usage/batch"
	return func(i int64) request {
		var body bytes.Buffer
		body.WriteString(`{"items":[`)
		for k := range int64(size) {
			if k > 0 {
				body.WriteByte(',')
			}
			n := (i-1)*int64(size) + k
			fmt.Fprintf(&body, `{"requestId":"%s-%s-%d","username":"%s","modelName":"%s","inputTokens":%d,"cachedTokens":%d,"outputTokens":%d,"reasoningTokens":0}`,
				r.id, phase, n, r.users[int(n)%len(r.users)], benchModel, 1000+n%500, 200, 300+n%100)
		}
		body.WriteString(`]}`)
		return request{url: url, header: header, body: body.Bytes(), items: size}
	}
}
