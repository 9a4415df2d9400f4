package messaging

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
)

// DeadLetterMiddleware is the pattern of dom's DLQ. Before the handler,
// which stores dead messages, the delivery's retry header is parsed
// (Delivery.Retry) and its headers are rendered as JSON
// (Delivery.HeadersJSON), with a dead reason for a message the broker
// dead-lettered itself (past a quorum queue's delivery limit): "broker: "
// and its x-first-death-reason. A DLQ has no DLQ of its own, so a failure never
// drops the message: the middleware answers the error after a pause
// (cfg.RequeueDelay), and the router nacks the delivery back to its queue
// to be tried again. A Permanent failure (the database cannot keep this
// message whole) is logged as such, with the message id and size, and
// counted as failed, so that it is seen and fixed; any other (the database
// is down) is counted as requeued. A message stored is counted as stored.
func DeadLetterMiddleware(dom topology.Domain, cfg ChainConfig, log *slog.Logger) message.HandlerMiddleware {
	delay := cmp.Or(cfg.RequeueDelay, RequeueDelayDefault)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			in := inflightIn(msg)
			readRetry(in, dom)
			in.d.withBrokerReason()
			in.d.HeadersJSON = in.d.headersJSON()
			ctx, d := msg.Context(), in.d
			began := time.Now()
			out, err := h(msg)
			took := time.Since(began)
			if err == nil {
				report(ctx, OutcomeStored, took)
				return out, nil
			}
			log := log.With("domain", dom.Name, "message_id", d.MessageID, "bytes", len(d.Body), "err", err)
			if IsPermanent(err) {
				log.ErrorContext(ctx, "dead message cannot be stored whole; it stays in the DLQ and is tried again")
				report(ctx, OutcomeFailed, took)
			} else {
				log.ErrorContext(ctx, "could not store a dead message; requeueing it")
				report(ctx, OutcomeRequeued, took)
			}
			pause(ctx, delay)
			return nil, err
		}
	}
}
