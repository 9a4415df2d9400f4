package topology

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
