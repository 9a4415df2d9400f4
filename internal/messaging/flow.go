package messaging

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
)

// HandlerFunc handles one delivery. Returning an error retries the message
// through the domain's retry queue; an error marked Permanent sends it to the
// DLQ at once. A panic counts as an error.
type HandlerFunc func(ctx context.Context, d Delivery) error

// RouteFunc is what a Consumer runs for each delivery of a route.
type RouteFunc func(ctx context.Context, msg *message.Message) error

// Flow defaults.
const (
	HandlerTimeoutDefault = 5 * time.Minute
	RequeueDelayDefault   = 2 * time.Second
	maxErrorText          = 2000
)

// FlowConfig configures a Flow. Zero fields take the defaults.
type FlowConfig struct {
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
func NewFlow(cfg FlowConfig, pub *Publisher, m *Metrics, log *slog.Logger) *Flow {
	return &Flow{
		pub: pub, metrics: m, log: log,
		timeout: cmp.Or(cfg.HandlerTimeout, HandlerTimeoutDefault),
		delay:   cmp.Or(cfg.RequeueDelay, RequeueDelayDefault),
	}
}

// Main wraps the handler of dom's main queue. On success the delivery is
// acked. On failure a copy goes to the retry routing key with the retry
// header + 1 and lastError set, or, past the maximum or for a permanent
// error, to the DLQ routing key; the original is acked only after the copy is
// confirmed. A domain without retries (usage stats) logs and counts the failure.
func (f *Flow) Main(dom topology.Domain, h HandlerFunc) RouteFunc {
	return func(ctx context.Context, msg *message.Message) error {
		d := newDelivery(msg, dom, dom.Queue)
		ctx = withDelivery(ctx, d) // the flow's lines carry the trace id as the handler's do
		began := time.Now()
		err := f.call(ctx, h, d)
		took := time.Since(began)
		if err == nil {
			f.metrics.handled(dom.Name, OutcomeOK, took)
			return nil
		}
		// Built only here: the success path, by far the common one, logs nothing.
		log := f.log.With("domain", dom.Name, "message_id", d.MessageID, "retry", d.Retry)
		if ctx.Err() != nil {
			// The consumer is shutting down past its timeout: the failure is
			// the shutdown's, not the message's. Requeue it as it was.
			log.WarnContext(ctx, "handler canceled by shutdown; requeueing the delivery", "err", err)
			f.metrics.handled(dom.Name, OutcomeRequeued, took)
			return err
		}
		if !dom.HasRetry() {
			log.ErrorContext(ctx, "handler failed; the domain has no retry", "err", err)
			f.metrics.handled(dom.Name, OutcomeFailed, took)
			return nil
		}
		out, outcome := d.retryCopy(dom, err)
		if perr := f.pub.Send(context.WithoutCancel(ctx), out); perr != nil {
			log.ErrorContext(ctx, "could not publish the copy; requeueing the delivery", "err", err, "publish_err", perr)
			f.metrics.handled(dom.Name, OutcomeRequeued, took)
			pause(ctx, f.delay)
			return perr
		}
		f.metrics.handled(dom.Name, outcome, took)
		if outcome == OutcomeDead {
			log.ErrorContext(ctx, "message sent to the DLQ", "err", err, "reason", out.Headers[HeaderDeadReason])
		} else {
			log.WarnContext(ctx, "message sent to the retry queue", "err", err, "next_retry", d.Retry+1, "delay", dom.Retry.Delay)
		}
		return nil
	}
}

// DLQ wraps the handler of dom's DLQ, which stores dead messages. A DLQ has
// no DLQ of its own, so a failure never drops the message: it is requeued
// after a pause and tried again. A Permanent failure (the database cannot
// keep this message whole) is logged as such with the message id and size
// and counted as failed, so that it is seen and fixed; the message waits in
// its DLQ meanwhile, and is stored once the cause is gone. Any other failure
// (the database is down) is counted as requeued.
func (f *Flow) DLQ(dom topology.Domain, h HandlerFunc) RouteFunc {
	return func(ctx context.Context, msg *message.Message) error {
		d := newDelivery(msg, dom, dom.DLQ)
		ctx = withDelivery(ctx, d)
		began := time.Now()
		if err := f.call(ctx, h, d); err != nil {
			log := f.log.With("domain", dom.Name, "message_id", d.MessageID, "bytes", len(d.Body), "err", err)
			if IsPermanent(err) {
				log.ErrorContext(ctx, "dead message cannot be stored whole; it stays in the DLQ and is tried again")
				f.metrics.handled(dom.Name, OutcomeFailed, time.Since(began))
			} else {
				log.ErrorContext(ctx, "could not store a dead message; requeueing it")
				f.metrics.handled(dom.Name, OutcomeRequeued, time.Since(began))
			}
			pause(ctx, f.delay)
			return err
		}
		f.metrics.handled(dom.Name, OutcomeStored, time.Since(began))
		return nil
	}
}

// call runs h with a timeout, turning a panic into an error so that it is
// retried like one. ctx carries the delivery (withDelivery).
func (f *Flow) call(ctx context.Context, h HandlerFunc, d Delivery) (err error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			f.log.ErrorContext(ctx, "handler panicked", "message_id", d.MessageID, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return h(ctx, d)
}

// retryCopy builds the copy of d that goes to the retry queue, or to the DLQ
// when err is permanent or the retries are spent.
func (d Delivery) retryCopy(dom topology.Domain, err error) (Outgoing, string) {
	text := truncate(err.Error())
	out := Outgoing{
		MessageID: d.MessageID,
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
