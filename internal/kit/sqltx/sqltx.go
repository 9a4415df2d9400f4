// Package sqltx runs MySQL transactions through gorm: Transact commits or
// rolls back and re-runs one that hit a deadlock or a lock-wait timeout,
// Retry does the same for a single statement;
// the error helpers tell those and unique-key violations apart. It knows
// nothing of Isle.
package sqltx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Transact attempts before giving up on deadlocks and lock-wait timeouts.
const transactAttempts = 5

// Transact runs fn in a transaction: it commits when fn returns nil and rolls
// back when fn returns an error or panics (the panic goes on). A deadlock
// (1213) or lock-wait timeout (1205) re-runs fn from the start, a few times,
// with a short back-off; fn must therefore only touch the database through tx.
//
// It runs in a span, "mysql transaction" (with the attempts it took), so
// that a trace shows the transaction and fn's context (tx.Statement.Context)
// carries it: what fn writes to an outbox continues the trace.
func Transact(ctx context.Context, db *gorm.DB, fn func(tx *gorm.DB) error) (err error) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "mysql transaction", trace.WithSpanKind(trace.SpanKindClient))
	attempt := 1
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.String("db.system.name", "mysql"), attribute.Int("isle.attempts", attempt))
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
		}
		span.End()
	}()
	return retrying(ctx, "transaction", &attempt, func() error { return db.WithContext(ctx).Transaction(fn) })
}

// Retry runs fn, one statement in its own (autocommit) transaction, and
// runs it again after a deadlock or lock-wait timeout, as Transact does a
// transaction: for a single statement that may be a deadlock's victim, at
// the cost of one round trip rather than Transact's three.
func Retry(ctx context.Context, fn func() error) error {
	attempt := 1
	return retrying(ctx, "statement", &attempt, fn)
}

// retrying runs fn until it succeeds, fails with an error that is not
// Retryable, or has been run transactAttempts times, with a short
// back-off; *attempt counts the runs.
func retrying(ctx context.Context, what string, attempt *int, fn func() error) error {
	for ; ; *attempt++ {
		err := fn()
		if err == nil || !Retryable(err) || *attempt == transactAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sqltx: %s: %w (after %v)", what, ctx.Err(), err)
		case <-time.After(time.Duration(*attempt**attempt) * 5 * time.Millisecond):
		}
	}
}

// tracerName is the instrumentation scope of the transactions' spans
// (Isle's, as internal/kit/tracing names it; sqltx imports no Isle package).
const tracerName = "github.com/eisland/isle"

// MySQL error numbers Isle branches on.
const (
	ErrNumDuplicate   = 1062
	ErrNumLockTimeout = 1205
	ErrNumDeadlock    = 1213
)

// Retryable reports whether err is a deadlock or lock-wait timeout, after
// which the whole transaction may be run again.
func Retryable(err error) bool {
	n := ErrNum(err)
	return n == ErrNumDeadlock || n == ErrNumLockTimeout
}

// IsDuplicate reports whether err is a unique-key violation.
func IsDuplicate(err error) bool {
	return ErrNum(err) == ErrNumDuplicate || errors.Is(err, gorm.ErrDuplicatedKey)
}

// ErrNum is the MySQL error number of err, or 0.
func ErrNum(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}
