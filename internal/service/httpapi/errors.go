package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is an error a handler returns to answer with a status and a code.
type Error struct {
	Status     int
	Code       string // machine-readable, e.g. "rate_limited"
	Message    string // for humans
	RetryAfter time.Duration
	Details    map[string]any // extra fields in the error object (e.g. a balance)
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(status int, code, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// The error codes of the API, one per status it answers with.
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodePaymentRequired  = "payment_required"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "payload_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeRateLimited      = "rate_limited"
	CodeInternal         = "internal"
	CodeUnavailable      = "unavailable"
)

// ReasonOutcomeUnknown is the reason of a 503 to a charge whose script
// Redis may have run without its answer coming back: unlike any other 503,
// it does not say that nothing was done.
const ReasonOutcomeUnknown = "outcome_unknown"

// ErrUnavailable marks a failure of a dependency (broker, store) that the
// client may retry: the answer is 503.
var ErrUnavailable = errors.New("a dependency is unavailable")

// Unavailable wraps err as ErrUnavailable.
func Unavailable(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// BadRequest is a 400 with a message.
func BadRequest(format string, a ...any) *Error {
	return Errorf(http.StatusBadRequest, CodeBadRequest, format, a...)
}

type errorBody struct {
	Error map[string]any `json:"error"`
}

// writeError answers with the error model and returns the status it sent.
// Errors that are not an *Error become 413, 503 or 500; a 500 says nothing
// of its cause (the log does).
func writeError(w http.ResponseWriter, err error) (status int) {
	e := asError(err)
	if e.RetryAfter > 0 {
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	writeJSON(w, e.Status, errorBody{Error: e.object()})
	return e.Status
}

// asError is err as the error model answers it: an *Error as it is, and
// any other as 413, 503 or 500.
func asError(err error) *Error {
	var e *Error
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &tooLarge):
		return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body larger than %d bytes", tooLarge.Limit)
	case errors.Is(err, ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "temporarily unavailable, retry later", RetryAfter: time.Second}
	default:
		return Errorf(http.StatusInternalServerError, CodeInternal, "internal error")
	}
}

// object is e's error object: its code, message and details.
func (e *Error) object() map[string]any {
	obj := map[string]any{"code": e.Code, "message": e.Message}
	for k, v := range e.Details {
		obj[k] = v
	}
	return obj
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// JSON answers with status and v; handlers return its nil error.
func JSON(w http.ResponseWriter, status int, v any) error {
	writeJSON(w, status, v)
	return nil
}
