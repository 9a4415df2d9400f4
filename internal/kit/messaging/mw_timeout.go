package messaging

import (
	"cmp"
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// TimeoutMiddleware bounds the handler's context by d (0:
// HandlerTimeoutDefault). The middleware around it get the message's
// context back as it was, not canceled: a handler that ran out of time is a
// failure to retry, not a shutdown.
func TimeoutMiddleware(d time.Duration) message.HandlerMiddleware {
	d = cmp.Or(d, HandlerTimeoutDefault)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			parent := msg.Context()
			ctx, cancel := context.WithTimeout(parent, d)
			defer func() {
				cancel()
				msg.SetContext(parent)
			}()
			msg.SetContext(ctx)
			return h(msg)
		}
	}
}
