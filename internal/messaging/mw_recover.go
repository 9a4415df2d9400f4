package messaging

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"
)

// RecovererMiddleware turns a panic of the handler into an error (its
// message is "panic: " and the value), logging its stack once, here, so
// that the retry middleware around it retries it like any failure.
func RecovererMiddleware(log *slog.Logger) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) (out []*message.Message, err error) {
			err = recovered(msg.Context(), func(context.Context) error {
				var herr error
				out, herr = h(msg)
				return herr
			})
			if p, ok := errors.AsType[*panicError](err); ok {
				log.ErrorContext(msg.Context(), "handler panicked",
					"message_id", deliveryIn(msg).MessageID, "panic", p.value, "stack", string(p.stack))
			}
			return out, err
		}
	}
}
