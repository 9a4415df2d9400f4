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
// The counts are m's (isle_messages_total), with the handler's time
// (isle_handler_duration_seconds).
func DeadLetterMiddleware(dom topology.Domain, m *Metrics, cfg ChainConfig, log *slog.Logger) message.HandlerMiddleware {
	delay := cmp.Or(cfg.RequeueDelay, RequeueDelayDefault)
	return counted(dom.Name, m, func(h message.HandlerFunc, msg *message.Message) (verdict, []*message.Message, error) {
		in := inflightIn(msg)
		readRetry(in, dom)
		in.d.withBrokerReason()
		in.d.HeadersJSON = in.d.headersJSON()
		ctx, d := msg.Context(), in.d
		began := time.Now()
		out, err := h(msg)
		took := time.Since(began)
		if err == nil {
			return verdict{OutcomeStored, took}, out, nil
		}
		log := log.With("domain", dom.Name, "message_id", d.MessageID, "bytes", len(d.Body), "err", err)
		outcome := OutcomeRequeued
		if IsPermanent(err) {
			log.ErrorContext(ctx, "dead message cannot be stored whole; it stays in the DLQ and is tried again")
			outcome = OutcomeFailed
		} else {
			log.ErrorContext(ctx, "could not store a dead message; requeueing it")
		}
		pause(ctx, delay)
		return verdict{outcome, took}, nil, err
	})
}
