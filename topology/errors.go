package topology

import (
	"errors"
	"fmt"
)

// DecodeError is a message body that cannot become a valid record: it is not
// one JSON object, a field has the wrong shape, or the record fails Validate.
//
// It is permanent: the same bytes fail the same way on every delivery, so the
// messaging layer sends the message to its DLQ at once instead of retrying.
// Recognise it with errors.As(err, new(*topology.DecodeError)), or through the
// Permanent method for code that only knows interface{ Permanent() bool }.
type DecodeError struct {
	Record string // Java record name, e.g. "PaymentNotifyMessage"
	Field  string // JSON name of the offending field; "" when the body as a whole is wrong
	Err    error  // the cause: a *FieldError when Field is set
}

func newDecodeError(record string, err error) *DecodeError {
	e := &DecodeError{Record: record, Err: err}
	if fe, ok := errors.AsType[*FieldError](err); ok {
		e.Field = fe.Field
	}
	return e
}

// Error says which record and, through its cause, which field.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("topology: decode %s: %v", e.Record, e.Err)
}

// Unwrap returns the cause.
func (e *DecodeError) Unwrap() error { return e.Err }

// Permanent reports true: redelivering the body cannot succeed.
func (e *DecodeError) Permanent() bool { return true }

// FieldError is one field of a record that breaks the contract, on decoding
// or in Validate.
type FieldError struct {
	Field string // JSON name, e.g. "amountFen"
	Err   error  // why
}

func (e *FieldError) Error() string { return "field " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *FieldError) Unwrap() error { return e.Err }
