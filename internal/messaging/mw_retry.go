// The main queues' retry pattern as watermill middleware, rather than
// watermill's own middleware.Retry (which retries in process, holding the
// message through its back-off) or middleware.PoisonQueue (which sends every
// failure to one topic at once): neither fits the contract, where each
// domain has a retry queue, a retry header to count on and a DLQ of its own.

package messaging

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
)

// RetryMiddleware is the retry pattern of dom's main queue, as Flow.Main
// applies it. Before the handler, the delivery's retry header is parsed
// (Delivery.Retry) and a delivery whose producer set no id gets one of its
// own (Delivery.IsleID); the handler finds it so in its context
// (DeliveryFrom). When the handler fails, a copy goes to the retry routing
// key with the retry header + 1 and lastError set, or, past the maximum or
// for a Permanent error, to the DLQ routing key with its dead reason; once
// the copy is confirmed the middleware answers nil, so the router acks the
// original. A copy that cannot be published is an error after a pause
// (cfg.RequeueDelay), so the router nacks the delivery back to its queue; so
// is a failure while the message's context is canceled (the worker's
// shutdown timeout passed), at once and without a copy. A domain without
// retries (usage stats) logs and counts the failure and answers nil. The
// outcome goes to MetricsMiddleware around it.
func RetryMiddleware(dom topology.Domain, pub *Publisher, cfg ChainConfig, log *slog.Logger) message.HandlerMiddleware {
	r := &retrier{dom: dom, pub: pub, log: log, delay: cmp.Or(cfg.RequeueDelay, RequeueDelayDefault)}
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			d := deliveryIn(msg)
			if dom.RetryHeader != "" {
				d.Retry = ParseRetry(d.Headers[dom.RetryHeader])
			}
			d.assignID() // before the handler: its copies carry it
			ctx := withDelivery(msg.Context(), d)
			msg.SetContext(ctx)
			began := time.Now()
			out, err := h(msg)
			took := time.Since(began)
			if err == nil {
				report(ctx, OutcomeOK, took)
				return out, nil
			}
			return nil, r.failed(ctx, d, err, took)
		}
	}
}

type retrier struct {
	dom   topology.Domain
	pub   *Publisher
	log   *slog.Logger
	delay time.Duration
}

// failed deals with a delivery its handler failed, as Flow.failed does: it
// answers nil when a copy went to the retry queue or the DLQ (or the domain
// keeps none), and an error when the delivery must go back to its queue.
func (r *retrier) failed(ctx context.Context, d Delivery, err error, took time.Duration) error {
	log := r.log.With("domain", r.dom.Name, "message_id", d.Key(), "retry", d.Retry)
	if ctx.Err() != nil {
		// The worker is shutting down past its timeout: the failure is the
		// shutdown's, not the message's. Requeue it as it was.
		log.WarnContext(ctx, "handler canceled by shutdown; requeueing the delivery", "err", err)
		report(ctx, OutcomeRequeued, took)
		return err
	}
	if !r.dom.HasRetry() {
		log.ErrorContext(ctx, "handler failed; the domain has no retry", "err", err)
		report(ctx, OutcomeFailed, took)
		return nil
	}
	out, outcome := d.retryCopy(r.dom, err)
	if perr := r.pub.Send(context.WithoutCancel(ctx), out); perr != nil {
		log.ErrorContext(ctx, "could not publish the copy; requeueing the delivery", "err", err, "publish_err", perr)
		report(ctx, OutcomeRequeued, took)
		pause(ctx, r.delay) // a broken broker is not spun on
		return perr
	}
	report(ctx, outcome, took)
	if outcome == OutcomeDead {
		log.ErrorContext(ctx, "message sent to the DLQ", "err", err, "reason", out.Headers[HeaderDeadReason])
	} else {
		log.WarnContext(ctx, "message sent to the retry queue", "err", err, "next_retry", d.Retry+1, "delay", r.dom.Retry.Delay)
	}
	return nil
}
