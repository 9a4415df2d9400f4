// The main queues' retry pattern as watermill middleware, rather than
// watermill's own middleware.Retry (which retries in process, holding the
// message through its back-off) or middleware.PoisonQueue (which sends every
// failure to one topic at once): neither fits the contract, where each
// domain has a retry queue, a retry header to count on and a DLQ of its own.

package messaging

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
)

// RetryMiddleware is the Spring backend's retry pattern on dom's main
// queue. Before the handler, the delivery's retry header is parsed
// (Delivery.Retry) and a delivery whose producer set no id gets one of its
// own (Delivery.IsleID); the handler finds it so in its context
// (DeliveryFrom). When the handler fails, a copy goes to the retry routing
// key with the retry header + 1 and lastError set, or, past the maximum or
// for a Permanent error, to the DLQ routing key with its dead reason; once
// the copy is confirmed the middleware answers nil, so the router acks the
// original. A copy that cannot be published is an error after a pause
// (cfg.RequeueDelay), so the router nacks the delivery back to its queue; so
// is a failure while the message's context is canceled (its channel is
// gone, ErrChannelLost, or the worker's shutdown timeout passed), at once
// and without a copy: the broker has the delivery back. A domain without
// retries (usage stats) logs and counts the failure and answers nil. Each
// delivery's outcome is counted in m (isle_messages_total), with the time
// of its handler alone (isle_handler_duration_seconds).
//
// A redelivered delivery without a producer's id first waits for the
// deliveries of its body still in their handler in this process (bodyRuns):
// it may be one of them come back after a lost channel.
func RetryMiddleware(dom topology.Domain, pub *Publisher, m *Metrics, cfg ChainConfig, log *slog.Logger) message.HandlerMiddleware {
	return counted(dom.Name, m, newRetrier(dom, pub, cfg, log).decide)
}

// runLeaving runs h, then leave, also when h panics.
func runLeaving(h message.HandlerFunc, msg *message.Message, leave func()) ([]*message.Message, error) {
	defer leave()
	return h(msg)
}

type retrier struct {
	dom    topology.Domain
	pub    *Publisher
	log    *slog.Logger
	delay  time.Duration
	bodies bodyRuns
}

func newRetrier(dom topology.Domain, pub *Publisher, cfg ChainConfig, log *slog.Logger) *retrier {
	return &retrier{dom: dom, pub: pub, log: log, delay: cmp.Or(cfg.RequeueDelay, RequeueDelayDefault)}
}

// decide runs h on msg with the retry pattern around it.
func (r *retrier) decide(h message.HandlerFunc, msg *message.Message) (verdict, []*message.Message, error) {
	in := inflightIn(msg)
	readRetry(in, r.dom)
	in.d.assignID() // before the handler: its copies carry it
	ctx, d := msg.Context(), in.d
	began := time.Now()
	leave, err := r.bodies.enter(ctx, d)
	if err != nil {
		// Its context ended while an earlier delivery of its body ran:
		// the broker has it back.
		return verdict{OutcomeRequeued, time.Since(began)}, nil, err
	}
	out, err := runLeaving(h, msg, leave)
	took := time.Since(began)
	if err == nil {
		return verdict{OutcomeOK, took}, out, nil
	}
	outcome, err := r.failed(ctx, d, err)
	return verdict{outcome, took}, nil, err
}

// failed deals with a delivery its handler failed and returns the outcome:
// with nil when a copy went to the retry queue or the DLQ (or the domain
// keeps none), with an error when the delivery must go back to its queue.
func (r *retrier) failed(ctx context.Context, d Delivery, err error) (string, error) {
	log := r.log.With("domain", r.dom.Name, "message_id", d.Key(), "retry", d.Retry)
	if ctx.Err() != nil {
		// The delivery's channel is gone (the broker has it back and gives
		// it out again), or the worker is shutting down past its timeout:
		// the failure is theirs, not the message's, and a copy would live
		// beside the redelivery. Leave it to the broker as it was.
		if errors.Is(context.Cause(ctx), ErrChannelLost) {
			log.WarnContext(ctx, "handler failed after its channel was lost; no copy, the broker delivers it again", "err", err)
		} else {
			log.WarnContext(ctx, "handler canceled by shutdown; requeueing the delivery", "err", err)
		}
		return OutcomeRequeued, err
	}
	if !r.dom.HasRetry() {
		log.ErrorContext(ctx, "handler failed; the domain has no retry", "err", err)
		return OutcomeFailed, nil
	}
	out, outcome := d.retryCopy(r.dom, err)
	if perr := r.pub.Send(context.WithoutCancel(ctx), out); perr != nil {
		log.ErrorContext(ctx, "could not publish the copy; requeueing the delivery", "err", err, "publish_err", perr)
		pause(ctx, r.delay) // a broken broker is not spun on
		return OutcomeRequeued, perr
	}
	if outcome == OutcomeDead {
		log.ErrorContext(ctx, "message sent to the DLQ", "err", err, "reason", out.Headers[HeaderDeadReason])
	} else {
		log.WarnContext(ctx, "message sent to the retry queue", "err", err, "next_retry", d.Retry+1, "delay", r.dom.Retry.Delay)
	}
	return outcome, nil
}

// maxErrorText bounds the error text a copy carries (truncate).
const maxErrorText = 2000

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

// readRetry reads dom's retry header of in's delivery (Delivery.Retry).
func readRetry(in *inflight, dom topology.Domain) {
	if dom.RetryHeader != "" {
		in.d.Retry = ParseRetry(in.d.Headers[dom.RetryHeader])
	}
}
