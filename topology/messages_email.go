package topology

import "strings"

// EmailCodeDispatch is EmailCodeDispatchMessage (domain "email"): a
// verification code to mail. The code is plaintext only inside the message;
// Redis keeps its HMAC.
type EmailCodeDispatch struct {
	TraceID               string `json:"traceId"`
	Email                 string `json:"email"`
	Scene                 string `json:"scene"` // REGISTER, LOGIN, RESET_PASSWORD, CHANGE_EMAIL, UNREGISTER
	Code                  string `json:"code"`  // 6 digits
	CreatedAtEpochSeconds int64  `json:"createdAtEpochSeconds"`
	LastError             string `json:"lastError"`
}

// Record is the Java record name.
func (EmailCodeDispatch) Record() string { return "EmailCodeDispatchMessage" }

// Domain is the domain EmailCodeDispatch travels on.
func (EmailCodeDispatch) Domain() string { return DomainEmail }

// Validate requires a mailable email, a known scene, a 6-digit code and a
// creation time.
func (m EmailCodeDispatch) Validate() error {
	return firstError(
		email("email", m.Email),
		oneOf("scene", m.Scene, "REGISTER", "LOGIN", "RESET_PASSWORD", "CHANGE_EMAIL", "UNREGISTER"),
		code6("code", m.Code),
		positive("createdAtEpochSeconds", m.CreatedAtEpochSeconds),
	)
}

// code6 requires exactly six ASCII digits.
func code6(field, v string) error {
	if len(v) != 6 || strings.Trim(v, "0123456789") != "" {
		return invalid(field, "want exactly 6 digits")
	}
	return nil
}
