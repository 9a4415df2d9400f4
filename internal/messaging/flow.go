package messaging

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/eisland/isle/topology"
)

// HandlerFunc handles one delivery. Returning an error retries the message
// through the domain's retry queue; an error marked Permanent sends it to the
// DLQ at once. A panic counts as an error.
type HandlerFunc func(ctx context.Context, d Delivery) error

// BatchHandlerFunc handles deliveries together (one MySQL transaction, one
// Redis pipeline for all of them) and answers each as a HandlerFunc would:
// nil, an error, or a Permanent one. A panic fails every one.
type BatchHandlerFunc func(ctx context.Context, ds []Delivery) []error

// Each handles a batch one delivery at a time with h, each with the
// delivery in its context (DeliveryFrom) and a panic of its own.
func Each(h HandlerFunc) BatchHandlerFunc {
	return func(ctx context.Context, ds []Delivery) []error {
		errs := make([]error, len(ds))
		for i, d := range ds {
			errs[i] = recovered(withDelivery(ctx, d), func(ctx context.Context) error { return h(ctx, d) })
		}
		return errs
	}
}

// Flow defaults.
const (
	HandlerTimeoutDefault = 5 * time.Minute
	RequeueDelayDefault   = 2 * time.Second
	maxErrorText          = 2000
)

// ChainConfig tunes the middleware of MainChain and DeadLetterChain (and a
// Flow). Zero fields take the defaults.
type ChainConfig struct {
	HandlerTimeout time.Duration // bound on one handler call (keep it under the broker's consumer_timeout)
	RequeueDelay   time.Duration // pause before a nack that requeues, so a broken broker is not spun on
}

// Flow applies the Spring backend's retry pattern around handlers.
type Flow struct {
	pub     *Publisher
	metrics *Metrics
	log     *slog.Logger
	timeout time.Duration
	delay   time.Duration
}

// NewFlow returns a Flow that publishes retry and DLQ copies with pub.
func NewFlow(cfg ChainConfig, pub *Publisher, m *Metrics, log *slog.Logger) *Flow {
	return &Flow{
		pub: pub, metrics: m, log: log,
		timeout: cmp.Or(cfg.HandlerTimeout, HandlerTimeoutDefault),
		delay:   cmp.Or(cfg.RequeueDelay, RequeueDelayDefault),
	}
}

// Main wraps the handler of dom's main queue. A delivery whose producer set
// no id gets one of its own first (Delivery.IsleID). A delivery handled is acked.
// On failure a copy goes to the retry routing key with the retry header + 1
// and lastError set, or, past the maximum or for a permanent error, to the
// DLQ routing key; the original is acked only after the copy is confirmed.
// A domain without retries (usage stats) logs and counts the failure.
func (f *Flow) Main(dom topology.Domain, h BatchHandlerFunc) RouteFunc {
	return func(ctx context.Context, ds []Delivery) []error {
		for i := range ds {
			if dom.RetryHeader != "" {
				ds[i].Retry = ParseRetry(ds[i].Headers[dom.RetryHeader])
			}
			ds[i].assignID() // before the handler: its copies carry it
		}
		f.metrics.batch(dom.Name, len(ds))
		began := time.Now()
		errs := f.call(ctx, h, ds)
		took := time.Since(began)
		out := make([]error, len(ds))
		ok, requeued := 0, false
		for i, err := range errs {
			if err == nil {
				ok++
				continue
			}
			var again bool
			out[i], again = f.failed(withDelivery(ctx, ds[i]), dom, ds[i], err, took)
			requeued = requeued || again
		}
		f.metrics.handledN(dom.Name, OutcomeOK, ok, took)
		if requeued {
			pause(ctx, f.delay) // a broken broker is not spun on
		}
		return out
	}
}

// failed deals with one delivery its handler failed: it answers nil when
// a copy went to the retry queue or the DLQ (or the domain keeps none), and
// an error, with again set, when the delivery must go back to its queue.
func (f *Flow) failed(ctx context.Context, dom topology.Domain, d Delivery, err error, took time.Duration) (error, bool) {
	f.logPanic(ctx, d, err)
	log := f.log.With("domain", dom.Name, "message_id", d.Key(), "retry", d.Retry)
	if ctx.Err() != nil {
		// The consumer is shutting down past its timeout: the failure is
		// the shutdown's, not the message's. Requeue it as it was.
		log.WarnContext(ctx, "handler canceled by shutdown; requeueing the delivery", "err", err)
		f.metrics.handled(dom.Name, OutcomeRequeued, took)
		return err, false
	}
	if !dom.HasRetry() {
		log.ErrorContext(ctx, "handler failed; the domain has no retry", "err", err)
		f.metrics.handled(dom.Name, OutcomeFailed, took)
		return nil, false
	}
	out, outcome := d.retryCopy(dom, err)
	if perr := f.pub.Send(context.WithoutCancel(ctx), out); perr != nil {
		log.ErrorContext(ctx, "could not publish the copy; requeueing the delivery", "err", err, "publish_err", perr)
		f.metrics.handled(dom.Name, OutcomeRequeued, took)
		return perr, true
	}
	f.metrics.handled(dom.Name, outcome, took)
	if outcome == OutcomeDead {
		log.ErrorContext(ctx, "message sent to the DLQ", "err", err, "reason", out.Headers[HeaderDeadReason])
	} else {
		log.WarnContext(ctx, "message sent to the retry queue", "err", err, "next_retry", d.Retry+1, "delay", dom.Retry.Delay)
	}
	return nil, false
}

// DLQ wraps the handler of dom's DLQ, which stores dead messages. A DLQ has
// no DLQ of its own, so a failure never drops the message: it is requeued
// after a pause and tried again. A Permanent failure (the database cannot
// keep this message whole) is logged as such with the message id and size
// and counted as failed, so that it is seen and fixed; the message waits in
// its DLQ meanwhile, and is stored once the cause is gone. Any other failure
// (the database is down) is counted as requeued.
func (f *Flow) DLQ(dom topology.Domain, h BatchHandlerFunc) RouteFunc {
	return func(ctx context.Context, ds []Delivery) []error {
		for i := range ds {
			if dom.RetryHeader != "" {
				ds[i].Retry = ParseRetry(ds[i].Headers[dom.RetryHeader])
			}
			ds[i].HeadersJSON = ds[i].headersJSON()
		}
		began := time.Now()
		errs := f.call(ctx, h, ds)
		took := time.Since(began)
		stored := 0
		for i, err := range errs {
			if err == nil {
				stored++
				continue
			}
			d := ds[i]
			f.logPanic(withDelivery(ctx, d), d, err)
			log := f.log.With("domain", dom.Name, "message_id", d.MessageID, "bytes", len(d.Body), "err", err)
			if IsPermanent(err) {
				log.ErrorContext(withDelivery(ctx, d), "dead message cannot be stored whole; it stays in the DLQ and is tried again")
				f.metrics.handled(dom.Name, OutcomeFailed, took)
			} else {
				log.ErrorContext(withDelivery(ctx, d), "could not store a dead message; requeueing it")
				f.metrics.handled(dom.Name, OutcomeRequeued, took)
			}
		}
		f.metrics.handledN(dom.Name, OutcomeStored, stored, took)
		if stored < len(ds) {
			pause(ctx, f.delay)
		}
		return errs
	}
}

// call runs h on ds with a timeout, turning a panic into an error for each
// delivery, so that they are retried like failures.
func (f *Flow) call(ctx context.Context, h BatchHandlerFunc, ds []Delivery) []error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if len(ds) == 1 {
		ctx = withDelivery(ctx, ds[0]) // the flow's and the handler's lines carry its trace id
	}
	var errs []error
	err := recovered(ctx, func(ctx context.Context) error {
		errs = h(ctx, ds)
		return nil
	})
	if err == nil && len(errs) != len(ds) {
		err = fmt.Errorf("handler answered %d of %d deliveries", len(errs), len(ds))
	}
	if err != nil {
		if len(ds) > 1 {
			f.logPanic(ctx, Delivery{MessageID: "(a batch)"}, err)
			err = fmt.Errorf("the batch's handler failed: %v", err) // its stack is logged once, here
		}
		errs = make([]error, len(ds))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// recovered runs fn, turning a panic into a *panicError.
func recovered(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}

// panicError is a handler's panic, retried like an error; the flow logs
// its stack.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// logPanic logs err's stack if it is a panic.
func (f *Flow) logPanic(ctx context.Context, d Delivery, err error) {
	if p, ok := errors.AsType[*panicError](err); ok {
		f.log.ErrorContext(ctx, "handler panicked", "message_id", d.MessageID, "panic", p.value, "stack", string(p.stack))
	}
}

// retryCopy builds the copy of d that goes to the retry queue, or to the DLQ
// when err is permanent or the retries are spent.
func (d Delivery) retryCopy(dom topology.Domain, err error) (Outgoing, string) {
	text := truncate(err.Error())
	out := Outgoing{
		MessageID: d.Key(),
		TraceID:   d.TraceID,
		Priority:  d.Priority,
		Body:      withLastError(d.Body, text),
		Headers:   d.copyHeaders(),
	}
	out.Headers[HeaderLastError] = text
	if reason := d.deadReason(dom, err, text); reason != "" {
		out.RoutingKey = dom.DLQKey
		out.Headers[dom.RetryHeader] = strconv.Itoa(d.Retry)
		out.Headers[HeaderDeadReason] = reason
		return out, OutcomeDead
	}
	out.RoutingKey = dom.RetryKey
	out.Headers[dom.RetryHeader] = strconv.Itoa(d.Retry + 1)
	return out, OutcomeRetried
}

// deadReason says why d goes to the DLQ rather than the retry queue, or ""
// when it is retried. text is err's (truncated) message.
func (d Delivery) deadReason(dom topology.Domain, err error, text string) string {
	switch {
	case IsPermanent(err):
		return "permanent: " + text
	case d.Retry >= dom.Retry.MaxRetries:
		return fmt.Sprintf("retries exhausted (%d of %d)", d.Retry, dom.Retry.MaxRetries)
	}
	return ""
}

// withLastError sets the record's lastError field in a JSON object body, as
// the Spring backend's consumers do; any other body is returned unchanged.
func withLastError(body []byte, text string) []byte {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return body
	}
	v, err := json.Marshal(text)
	if err != nil {
		return body
	}
	obj["lastError"] = v
	out, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	return out
}

// truncate bounds an error text kept in headers and bodies, marking the cut.
func truncate(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	return Clip(s, maxErrorText) + "…"
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
