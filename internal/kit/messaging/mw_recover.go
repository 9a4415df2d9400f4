package messaging

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

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
			logPanic(msg.Context(), log, msg, err)
			return out, err
		}
	}
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

// panicError is a handler's panic, retried like an error; the recoverer
// logs its stack.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// logPanic logs err's stack if it is a panic of msg's handler.
func logPanic(ctx context.Context, log *slog.Logger, msg *message.Message, err error) {
	if p, ok := errors.AsType[*panicError](err); ok {
		log.ErrorContext(ctx, "handler panicked", "message_id", inflightIn(msg).d.MessageID, "panic", p.value, "stack", string(p.stack))
	}
}
