package messaging

import (
	"errors"
	"fmt"
)

// ErrChannelLost is the cause (context.Cause) with which a message's context
// ends when the channel it came on is gone: its ack can no longer reach the
// broker, which has the delivery back and gives it to a consumer again.
var ErrChannelLost = errors.New("messaging: the delivery's channel is gone; the broker delivers it again")

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not retryable: the message goes to its DLQ at once
// (a body that cannot be decoded or validated, a business refusal). A plain
// error is retried through the retry queue.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, was marked
// Permanent or says so itself (a topology.DecodeError does).
func IsPermanent(err error) bool {
	var p permanentError
	if errors.As(err, &p) {
		return true
	}
	var self interface{ Permanent() bool }
	return errors.As(err, &self) && self.Permanent()
}

type unknownRecordError struct{ record string }

func (e unknownRecordError) Error() string {
	return "messaging: publish: no domain carries " + e.record
}

// errUnknownRecord names m by its Go type: m may be a nil pointer, on whose
// value-receiver Record method a call would panic.
func errUnknownRecord(m any) error { return unknownRecordError{fmt.Sprintf("%T", m)} }
