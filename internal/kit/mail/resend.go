package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// resendMailer posts to a Resend-compatible API: POST {base}/emails with a
// bearer key and an Idempotency-Key.
type resendMailer struct {
	endpoint string // {base}/emails
	from     string // as the API wants it: "addr" or "Name <addr>"
	key      string
	client   *http.Client
	opts     Options
}

func openResend(u *url.URL, opts Options) (Mailer, error) {
	from, params, errs := urlParams(u, "secure")
	if u.Host == "" {
		errs = append(errs, errors.New("host is required: resend://api.resend.com"))
	}
	scheme := "https"
	if v, ok := params["secure"]; ok {
		secure, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("secure %q: want true or false", v))
		}
		if !secure {
			scheme = "http"
		}
	}
	if opts.APIKey == "" {
		errs = append(errs, errors.New("an API key is required (Options.APIKey)"))
	}
	if err := urlErrors(u, errs); err != nil {
		return nil, err
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: opts.Timeout}
	}
	base := url.URL{Scheme: scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, "/")}
	return &resendMailer{
		endpoint: base.String() + "/emails",
		from:     from.String(),
		key:      opts.APIKey,
		client:   client,
		opts:     opts,
	}, nil
}

// resendRequest is the body of POST /emails.
type resendRequest struct {
	From    string            `json:"from"`
	To      []string          `json:"to"`
	Subject string            `json:"subject"`
	HTML    string            `json:"html,omitempty"`
	Text    string            `json:"text,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// resendError is the body of an error reply.
type resendError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Send posts m once. 2xx is success; 408, 429, 5xx, a 409 saying the same
// key is still in progress, and transport errors are temporary; any other
// reply is permanent (a 422 for a refused address, a 401/403 for a bad
// key, a 409 for a key reused with another message).
func (r *resendMailer) Send(ctx context.Context, m Message) error {
	if err := m.check(); err != nil {
		return err
	}
	body, err := json.Marshal(resendRequest{
		From: r.from, To: []string{m.To}, Subject: m.Subject, HTML: m.HTML, Text: m.Text,
		Headers: map[string]string{"Auto-Submitted": "auto-generated"},
	})
	if err != nil {
		return fmt.Errorf("mail: resend %s: %w", m.IdempotencyKey, permanent(err))
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout(ctx, r.opts.Timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("mail: resend %s: %w", m.IdempotencyKey, permanent(err))
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.IdempotencyKey)
	req.Header.Set("User-Agent", "isle-mail")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("mail: resend %s: %w", m.IdempotencyKey, err)
	}
	defer func() { _ = resp.Body.Close() }()
	// Read (a bounded part of) the reply so that the connection is reused.
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	var re resendError
	_ = json.Unmarshal(reply, &re)
	err = fmt.Errorf("HTTP %d %s: %s", resp.StatusCode, re.Name, truncate(re.Message, 200))
	if !retryableStatus(resp.StatusCode, re.Name) {
		err = permanent(err)
	}
	return fmt.Errorf("mail: resend %s to %s: %w", m.IdempotencyKey, m.To, err)
}

// retryableStatus tells the replies worth another try.
func retryableStatus(code int, name string) bool {
	switch {
	case code >= 500, code == http.StatusTooManyRequests, code == http.StatusRequestTimeout:
		return true
	case code == http.StatusConflict:
		// Resend: the first request with this key has not finished; a
		// retry gets its outcome. Another 409 name is a key reused with a
		// different message, which never succeeds.
		return name == "concurrent_idempotent_requests"
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
