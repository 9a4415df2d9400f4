package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Latencies are recorded in microseconds, from 1 µs to a minute, to 3
// significant digits.
const (
	latencyMax     = int64(time.Minute / time.Microsecond)
	requestTimeout = 30 * time.Second
	maxAnswer      = 64 << 10
)

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, latencyMax, 3) }

// Load is what one load phase against the API measured.
type Load struct {
	Mode      string  `json:"mode"`     // "closed" (N in flight) or "rate" (a fixed arrival rate)
	InFlight  int     `json:"inflight"` // closed: requests in flight
	TargetRPS float64 `json:"target_rps,omitempty"`
	Requests  int64   `json:"requests"`
	OK        int64   `json:"ok"` // answered 200
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Seconds   float64 `json:"seconds"`
	RPS       float64 `json:"rps"` // answers 200 per second
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	P999ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
	// Batches is how many batches carried the requests, when they went as
	// batches (each of Requests is then one charge of a batch).
	Batches int64 `json:"batches,omitempty"`
}

func (l *Load) fill(h *hdrhistogram.Histogram, took time.Duration) {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	l.Seconds = took.Seconds()
	if took > 0 {
		l.RPS = float64(l.OK) / took.Seconds()
	}
	l.P50ms, l.P99ms, l.P999ms, l.MaxMs = ms(h.ValueAtQuantile(50)), ms(h.ValueAtQuantile(99)), ms(h.ValueAtQuantile(99.9)), ms(h.Max())
}

// request is one request of a load: its URL, headers and body.
type request struct {
	url    string
	header http.Header
	body   []byte
	// items is how many charges a batch carries (its answer has a result
	// for each); 0 for a request of its own.
	items int
}

// client returns an HTTP client that keeps a connection per request in
// flight.
func client(inflight int) *http.Client {
	return &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{
			MaxIdleConns: inflight, MaxIdleConnsPerHost: inflight, DisableCompression: true,
			IdleConnTimeout: time.Minute,
		},
	}
}

// closedLoop keeps inflight requests in flight until count requests were
// sent or the time is up, whichever comes first: each of inflight senders
// sends its next request as soon as the last one is answered. It is how a
// pool of clients behaves, and it hides slowness (a slow answer delays the
// next request); fixedRate does not.
func closedLoop(ctx context.Context, inflight int, count int64, dur time.Duration, next func(i int64) request) Load {
	c := client(inflight)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var sent, ok, failed, batches atomic.Int64
	var firstErr atomic.Value
	hists := make([]*hdrhistogram.Histogram, inflight)
	var wg sync.WaitGroup
	began := time.Now()
	for w := range inflight {
		h := newHistogram()
		hists[w] = h
		wg.Go(func() {
			for ctx.Err() == nil {
				i := sent.Add(1)
				if count > 0 && i > count {
					return
				}
				r := next(i)
				t0 := time.Now()
				n, err := post(ctx, c, r)
				if ctx.Err() != nil && err != nil && n == 0 {
					sent.Add(-1) // cut off by the end of the phase: not counted
					return
				}
				_ = h.RecordValue(time.Since(t0).Microseconds())
				ok.Add(n)
				if err != nil {
					failed.Add(int64(max(r.items, 1)) - n)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				if r.items > 0 {
					batches.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	all := newHistogram()
	for _, h := range hists {
		all.Merge(h)
	}
	l := Load{Mode: "closed", InFlight: inflight, OK: ok.Load(), Errors: failed.Load(), Batches: batches.Load()}
	l.Requests = l.OK + l.Errors
	if v, isSet := firstErr.Load().(string); isSet {
		l.FirstErr = v
	}
	l.fill(all, took)
	return l
}

// post sends r and returns how many charges were answered 200 (or a
// score 202): 0 or 1 for a request of its own, up to r.items for a batch,
// whose err then names the first item answered otherwise.
func post(ctx context.Context, c *http.Client, r request) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return 0, err
	}
	req.Header = r.header
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer*int64(max(r.items, 1))))
	if resp.StatusCode/100 != 2 { // 200 for a charge or a batch, 202 for a score
		return 0, &statusError{status: resp.StatusCode, body: clip(string(body), 200)}
	}
	if r.items == 0 {
		return 1, nil
	}
	return batchAnswered(body, r.items)
}

// statusError is an answer other than 2xx.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

// batchAnswered reads a batch's answer: how many of its items were
// answered 200, and an error naming the first that was not.
func batchAnswered(body []byte, items int) (int64, error) {
	var a struct {
		Results []struct {
			Status int             `json:"status"`
			Error  json.RawMessage `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, fmt.Errorf("a batch's answer: %w: %s", err, clip(string(body), 200))
	}
	if len(a.Results) != items {
		return 0, fmt.Errorf("a batch of %d items answered %d results", items, len(a.Results))
	}
	var ok int64
	var first error
	for i, res := range a.Results {
		if res.Status == http.StatusOK {
			ok++
		} else if first == nil {
			first = fmt.Errorf("batch item %d: HTTP %d: %s", i, res.Status, clip(string(res.Error), 200))
		}
	}
	return ok, first
}

// fixedRate sends rate requests per second for dur, whether or not earlier
// ones were answered (vegeta's attacker), so a slow answer cannot hold
// back the requests that follow it: the latencies are what a client
// arriving at that rate sees.
func fixedRate(ctx context.Context, rate int, dur time.Duration, next func(i int64) request) Load {
	atk := vegeta.NewAttacker(vegeta.Timeout(requestTimeout), vegeta.MaxBody(maxAnswer), vegeta.KeepAlive(true),
		vegeta.Workers(uint64(min(rate, 64))), vegeta.MaxWorkers(4096), vegeta.Redirects(0))
	var i atomic.Int64
	targeter := func(t *vegeta.Target) error {
		r := next(i.Add(1))
		t.Method, t.URL, t.Header, t.Body = http.MethodPost, r.url, r.header, r.body
		return nil
	}
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	h := newHistogram()
	l := Load{Mode: "rate", TargetRPS: float64(rate)}
	began := time.Now()
	for res := range atk.Attack(targeter, vegeta.ConstantPacer{Freq: rate, Per: time.Second}, dur, "usage") {
		l.Requests++
		_ = h.RecordValue(res.Latency.Microseconds())
		if res.Code == http.StatusOK && res.Error == "" {
			l.OK++
			continue
		}
		l.Errors++
		if l.FirstErr == "" {
			l.FirstErr = clip(fmt.Sprintf("HTTP %d %s %s", res.Code, res.Error, res.Body), 200)
		}
	}
	l.fill(h, time.Since(began))
	return l
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
