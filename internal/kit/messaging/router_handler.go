package messaging

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
)

// HandlerFunc handles one delivery of a queue: the handler of a Router's
// route (RouterHandler), behind MainChain or DeadLetterChain. Returning an
// error retries the message through the domain's retry queue; an error
// marked Permanent sends it to the DLQ at once. A panic counts as an error.
type HandlerFunc func(ctx context.Context, d Delivery) error

// Defaults of ChainConfig.
const (
	HandlerTimeoutDefault = 5 * time.Minute
	RequeueDelayDefault   = 2 * time.Second
)

// ChainConfig tunes the middleware of MainChain and DeadLetterChain. Zero
// fields take the defaults.
type ChainConfig struct {
	HandlerTimeout time.Duration // bound on one handler call (TimeoutMiddleware; keep it under the broker's consumer_timeout)
	RequeueDelay   time.Duration // pause before an error that makes the router nack, so a broken broker is not spun on
}

// RouterHandler adapts h to a watermill router's handler
// (Router.AddConsumerHandler): h gets the message's context and the
// Delivery it carries (DeliveryFrom), as the middleware of MainChain or
// DeadLetterChain left it. Its error, or its panic, is theirs to deal with.
func RouterHandler(h HandlerFunc) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		in := inflightIn(msg)
		return h(msg.Context(), in.d)
	}
}

// MainChain is the middleware of dom's main queue, outermost first: a
// consumer span continuing the message's trace (TracingMiddleware), the
// trace id into the context (CorrelationMiddleware), the retry pattern,
// which counts each delivery's outcome (RetryMiddleware), panics made
// errors (RecovererMiddleware), and the handler's timeout
// (TimeoutMiddleware). Give it to the handler's AddMiddleware.
func MainChain(dom topology.Domain, pub *Publisher, m *Metrics, cfg ChainConfig, log *slog.Logger) []message.HandlerMiddleware {
	return []message.HandlerMiddleware{
		TracingMiddleware(dom.Queue),
		CorrelationMiddleware,
		RetryMiddleware(dom, pub, m, cfg, log),
		RecovererMiddleware(log),
		TimeoutMiddleware(cfg.HandlerTimeout),
	}
}

// DeadLetterChain is the middleware of dom's DLQ, outermost first, as
// MainChain's but for DeadLetterMiddleware in the place of the retry
// pattern.
func DeadLetterChain(dom topology.Domain, m *Metrics, cfg ChainConfig, log *slog.Logger) []message.HandlerMiddleware {
	return []message.HandlerMiddleware{
		TracingMiddleware(dom.DLQ),
		CorrelationMiddleware,
		DeadLetterMiddleware(dom, m, cfg, log),
		RecovererMiddleware(log),
		TimeoutMiddleware(cfg.HandlerTimeout),
	}
}

// inflightIn is the state msg's context carries (the Subscriber put it
// there); for a message that came from another subscriber than Isle's, it
// is made now from the message itself — its uuid, payload and metadata
// (AMQP properties left out) — and put in msg's context.
func inflightIn(msg *message.Message) *inflight {
	if in := inflightOf(msg.Context()); in != nil {
		return in
	}
	in := &inflight{d: deliveryOfMessage(msg)}
	msg.SetContext(withInflight(msg.Context(), in))
	return in
}

// deliveryOfMessage is the Delivery of a message that came from another
// subscriber than Isle's, read from the message itself.
func deliveryOfMessage(msg *message.Message) Delivery {
	d := Delivery{
		MessageID: msg.UUID,
		Body:      msg.Payload,
		Headers:   make(map[string]string, len(msg.Metadata)),
		table:     make(amqp.Table, len(msg.Metadata)),
	}
	for k, v := range msg.Metadata {
		if strings.HasPrefix(k, metaPrefix) {
			continue
		}
		d.Headers[k], d.table[k] = v, v
	}
	d.TypeID = d.Headers[HeaderTypeID]
	d.TraceID = cmp.Or(d.Headers[HeaderTraceID], msg.Metadata.Get(metaCorrelation))
	return d
}

// pause waits d, or less when ctx ends first.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
