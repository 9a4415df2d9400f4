package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// demoClient is the demo's side of the API: one HTTP client, and a tally
// per kind of request of what was sent and how the API answered.
type demoClient struct {
	base string
	http *http.Client

	mu      sync.Mutex
	tallies map[string]*tally
}

func newDemoClient(base string) *demoClient {
	return &demoClient{base: strings.TrimRight(base, "/"), http: &http.Client{Timeout: 15 * time.Second}, tallies: map[string]*tally{}}
}

// tally counts the requests of one kind by outcome: accepted (2xx, or the
// gateway's "success"), rate limited (429), refused (any other 4xx, or a
// callback the API did not take) and failed (5xx, no answer).
type tally struct {
	Sent, Accepted, Limited, Refused, Failed int
	// Why counts each refusal, limit and failure by its status and
	// message, as the summary lists them.
	Why map[string]int
	// RetryAfter is the longest Retry-After of a 429: when the limits
	// that refused requests let them through again.
	RetryAfter time.Duration
}

// apiCall is one request to the API.
type apiCall struct {
	kind        string // the tally it counts in
	method      string
	path        string
	token       string // bearer token; "" for none
	body        []byte
	contentType string
	header      http.Header
	// accepted overrides "2xx is accepted" (the gateway callbacks).
	accepted func(status int, body []byte) bool
}

// apiAnswer is what came back; Status 0 means no answer (Err says why).
type apiAnswer struct {
	Status     int
	Body       []byte
	RetryAfter time.Duration // of a 429 or 503
	Err        error
}

// OK reports whether the answer counted as accepted.
func (a apiAnswer) OK(c apiCall) bool {
	if c.accepted != nil {
		return a.Err == nil && c.accepted(a.Status, a.Body)
	}
	return a.Err == nil && a.Status >= 200 && a.Status < 300
}

// decode reads the answer's JSON into v.
func (a apiAnswer) decode(v any) error {
	if err := json.Unmarshal(a.Body, v); err != nil {
		return fmt.Errorf("HTTP %d: %w: %.120s", a.Status, err, a.Body)
	}
	return nil
}

// apiError is the API's error object, {"error":{"code","message",...}}.
type apiError struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	Limit      string `json:"limit"`      // 429 of the email codes: ip, email, cooldown, ...
	OutTradeNo string `json:"outTradeNo"` // 409 of an order: the active one
}

func (a apiAnswer) apiError() apiError {
	var e struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(a.Body, &e)
	return e.Error
}

// reason is an answer that was not accepted, in a few words.
func (a apiAnswer) reason() string {
	if a.Err != nil {
		err := a.Err
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // not the method and URL again
		}
		return "no answer: " + err.Error()
	}
	if e := a.apiError(); e.Code != "" {
		return fmt.Sprintf("%d %s: %s", a.Status, e.Code, clipText(e.Message, 100))
	}
	return fmt.Sprintf("%d: %s", a.Status, clipText(strings.TrimSpace(string(a.Body)), 100))
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// do sends c and counts its answer.
func (cl *demoClient) do(ctx context.Context, c apiCall) apiAnswer {
	a := cl.send(ctx, c)
	if ctx.Err() != nil && a.Err != nil {
		return a // cut short by the demo's end, not the API's fault: not counted
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t := cl.tallies[c.kind]
	if t == nil {
		t = &tally{Why: map[string]int{}}
		cl.tallies[c.kind] = t
	}
	t.Sent++
	switch {
	case a.OK(c):
		t.Accepted++
		return a
	case a.Err != nil || a.Status >= 500:
		t.Failed++
	case a.Status == http.StatusTooManyRequests:
		t.Limited++
		t.RetryAfter = max(t.RetryAfter, a.RetryAfter)
	default:
		t.Refused++
	}
	t.Why[a.reason()]++
	return a
}

func (cl *demoClient) send(ctx context.Context, c apiCall) apiAnswer {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, cl.base+c.path, body)
	if err != nil {
		return apiAnswer{Err: err}
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "islectl-demo")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return apiAnswer{Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return apiAnswer{Status: resp.StatusCode, Body: raw, RetryAfter: time.Duration(secs) * time.Second, Err: err}
}

// getJSON is a GET whose answer is decoded into v.
func (cl *demoClient) getJSON(ctx context.Context, kind, path, token string, v any) (apiAnswer, error) {
	a := cl.do(ctx, apiCall{kind: kind, method: http.MethodGet, path: path, token: token})
	if a.Err != nil {
		return a, a.Err
	}
	if a.Status != http.StatusOK {
		return a, fmt.Errorf("GET %s: %s", path, a.reason())
	}
	return a, a.decode(v)
}

// postJSON is a POST of v as JSON.
func (cl *demoClient) postJSON(ctx context.Context, kind, path, token string, v any, header http.Header) apiAnswer {
	body, err := json.Marshal(v)
	if err != nil {
		return apiAnswer{Err: err}
	}
	return cl.do(ctx, apiCall{kind: kind, method: http.MethodPost, path: path, token: token, body: body,
		contentType: "application/json", header: header})
}

// tally returns a copy of kind's tally.
func (cl *demoClient) tally(kind string) tally {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t := cl.tallies[kind]
	if t == nil {
		return tally{}
	}
	c := *t
	c.Why = map[string]int{}
	for k, v := range t.Why {
		c.Why[k] = v
	}
	return c
}

// totals adds up every tally: requests sent, accepted and rate limited.
func (cl *demoClient) totals() (sent, accepted, limited int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, t := range cl.tallies {
		sent, accepted, limited = sent+t.Sent, accepted+t.Accepted, limited+t.Limited
	}
	return sent, accepted, limited
}

// reasons lists t.Why, the most frequent first.
func (t tally) reasons() []string {
	keys := make([]string, 0, len(t.Why))
	for k := range t.Why {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if t.Why[keys[i]] != t.Why[keys[j]] {
			return t.Why[keys[i]] > t.Why[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d× %s", t.Why[k], k)
	}
	return out
}
