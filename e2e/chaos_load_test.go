//go:build chaos

package e2e_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/kit/paynotify"
)

// The mixed load: every domain's clients at once, each recording what the
// API answered, so the checks can tell accepted requests (whose effects
// must all be there, once) from refused or unanswered ones.

type loadEnv struct {
	addr   string
	tokens map[string]string // user → bearer token
	svc    string            // service token
	admin  string            // admin token: only admins see where the stores keep an object
	keys   paynotify.TestKeys
	client *http.Client
	// notifyTries is how many times a payment callback is sent until
	// answered success (0: three, 500 ms apart).
	notifyTries int
}

// call sends one request and returns the status (0: no answer), the body
// and how long the answer took.
func (l *loadEnv) call(ctx context.Context, method, path, token, ctype string, body []byte, rnd *rand.Rand) (int, []byte, time.Duration) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+l.addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	// Each client its own address: the per-IP limits are not what is tested.
	req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", rnd.IntN(256), rnd.IntN(256), 1+rnd.IntN(254)))
	began := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, nil, time.Since(began)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, raw, time.Since(began)
}

// charge is one usage request, alone or an item of a batch, and what the
// client was told.
type charge struct {
	user, id string
	in, out  int  // its tokens: the body a resend repeats
	batch    bool // sent as an item of a batch
	status   int  // the item's status in a batch's answer; a batch not answered 200 gives its items its own
	deducted string
	unknown  bool // a 503 whose reason is outcome_unknown: it may be either
}

// body is the charge's usage record, as POST /v1/agent/usage takes it and
// as an item of a batch.
func (c charge) body() map[string]any {
	return map[string]any{"requestId": c.id, "username": c.user, "modelName": "gpt-test", "inputTokens": c.in, "outputTokens": c.out}
}

// told reads what the client was told of a charge answered status with
// body raw: a charge's, or an error's.
func (c *charge) told(status int, raw []byte) {
	c.status = status
	switch status {
	case http.StatusOK:
		var a struct {
			Deducted string `json:"deductedFen"`
		}
		_ = json.Unmarshal(raw, &a)
		c.deducted = a.Deducted
	case http.StatusServiceUnavailable:
		var e struct{ Reason string }
		_ = json.Unmarshal(raw, &e)
		c.unknown = e.Reason == "outcome_unknown"
	}
}

// paid is one order and whether its gateway callback was answered success.
type paid struct {
	user, order, email string
	fen                int64
	accepted           bool
}

// code is one email code request.
type code struct {
	email    string
	accepted bool
}

// upload is one object upload.
type upload struct {
	user string
	id   uint64
	sum  [32]byte
}

// submission is one score submission.
type submission struct {
	user     string
	uid      int64
	score    int64
	accepted bool
}

// record is everything the load was answered, per domain.
type record struct {
	mu      sync.Mutex
	charges []charge
	paid    []paid
	codes   []code
	uploads []upload
	scores  []submission
	http    map[string]map[int]int // domain → status → count
	answers []answer               // every answer, in the order they came
}

// answer is one response of the API and when it came.
type answer struct {
	at     time.Time
	took   time.Duration
	domain string
	status int // 0: none
	// refused: the request was not taken (a 5xx, no answer, or "fail" to a
	// payment callback); deferred: a charge taken whose messages wait in
	// the outbox for the broker (doc/money.md).
	refused, deferred bool
}

// status records one answer of domain (status st, body raw).
func (r *record) status(domain string, st int, raw []byte, took time.Duration) {
	a := answer{at: time.Now(), took: took, domain: domain, status: st,
		refused:  st == 0 || st >= 500 || string(raw) == "fail",
		deferred: bytes.Contains(raw, []byte(`"ledger":"deferred"`))}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count(domain, st)
	r.answers = append(r.answers, a)
}

// batch records the answer to a batch of charges (status st, body raw)
// and its items with what each was told: the batch is refused when it or
// one of its items was (a 5xx, or no answer).
func (r *record) batch(st int, raw []byte, took time.Duration, items []charge) {
	a := answer{at: time.Now(), took: took, domain: "billing batches", status: st,
		refused: st == 0 || st >= 500, deferred: bytes.Contains(raw, []byte(`"ledger":"deferred"`))}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count(a.domain, st)
	for _, c := range items {
		a.refused = a.refused || c.status == 0 || c.status >= 500
		r.count("billing batch items", c.status)
	}
	r.answers = append(r.answers, a)
	r.charges = append(r.charges, items...)
}

// count counts an answer of status st of domain; r.mu is held.
func (r *record) count(domain string, st int) {
	if r.http[domain] == nil {
		r.http[domain] = map[int]int{}
	}
	r.http[domain][st]++
}

// chargeLoop posts usage charges for users until ctx ends.
func (l *loadEnv) chargeLoop(ctx context.Context, rnd *rand.Rand, users []string, rec *record, g int) {
	for n := 0; ctx.Err() == nil; n++ {
		c := charge{user: users[rnd.IntN(len(users))], id: fmt.Sprintf("c%d-%d", g, n), in: 1 + rnd.IntN(400), out: rnd.IntN(100)}
		body, _ := json.Marshal(c.body())
		st, raw, took := l.call(ctx, http.MethodPost, "/v1/agent/usage", l.svc, "application/json", body, rnd)
		if ctx.Err() != nil && st == 0 {
			return // cut off by the end of the load: not a request the check knows about
		}
		told := raw
		var e struct{ Error json.RawMessage }
		if st != http.StatusOK && json.Unmarshal(raw, &e) == nil && e.Error != nil {
			told = e.Error // the error's object, as a batch gives it for an item
		}
		c.told(st, told)
		rec.status("billing", st, raw, took)
		rec.mu.Lock()
		rec.charges = append(rec.charges, c)
		rec.mu.Unlock()
	}
}

// batchLoop posts usage charges for users in batches until ctx ends, as an
// agent gateway does: 1 to 20 calls a batch; in one batch of four an
// invalid call (answered 400 in its result, the others charged), and in
// one of three the resend of a charge answered 200 before, alone or in a
// batch (a replay, which must not charge again).
func (l *loadEnv) batchLoop(ctx context.Context, rnd *rand.Rand, users []string, rec *record, g int) {
	for n := 0; ctx.Err() == nil; n++ {
		var items []charge
		for k := range 1 + rnd.IntN(20) {
			items = append(items, charge{user: users[rnd.IntN(len(users))], id: fmt.Sprintf("b%d-%d-%d", g, n, k), in: 1 + rnd.IntN(400), out: rnd.IntN(100)})
		}
		if rnd.IntN(4) == 0 {
			items = append(items, charge{user: users[rnd.IntN(len(users))], id: fmt.Sprintf("b%d-%d-invalid", g, n), in: -1})
		}
		if rnd.IntN(3) == 0 {
			if c, ok := rec.chargedBefore(rnd); ok {
				items = append(items, charge{user: c.user, id: c.id, in: c.in, out: c.out})
			}
		}
		rnd.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		bodies := make([]map[string]any, len(items))
		for i, c := range items {
			bodies[i] = c.body()
		}
		body, _ := json.Marshal(map[string]any{"items": bodies})
		st, raw, took := l.call(ctx, http.MethodPost, "/v1/agent/usage/batch", l.svc, "application/json", body, rnd)
		if ctx.Err() != nil && st == 0 {
			return
		}
		var a struct {
			Results []struct {
				Status int
				Charge json.RawMessage
				Error  json.RawMessage
			}
		}
		read := st == http.StatusOK && json.Unmarshal(raw, &a) == nil && len(a.Results) == len(items)
		for i := range items {
			items[i].batch = true
			switch {
			case read && a.Results[i].Status == http.StatusOK:
				items[i].told(http.StatusOK, a.Results[i].Charge)
			case read:
				items[i].told(a.Results[i].Status, a.Results[i].Error)
			case st == http.StatusOK:
				items[i].status = 0 // an answer that cannot be read tells nothing
			default:
				items[i].status = st
			}
		}
		rec.batch(st, raw, took, items)
	}
}

// chargedBefore picks a charge answered 200 earlier, if there is one.
func (r *record) chargedBefore(rnd *rand.Rand) (charge, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.charges) == 0 {
		return charge{}, false
	}
	start := rnd.IntN(len(r.charges))
	for i := range min(len(r.charges), 100) {
		if c := r.charges[(start+i)%len(r.charges)]; c.status == http.StatusOK {
			return c, true
		}
	}
	return charge{}, false
}

// payLoop recharges user through orders paid by signed Alipay callbacks,
// each sent until answered success, up to notifyTries times (as Alipay resends),
// sometimes twice at once.
func (l *loadEnv) payLoop(ctx context.Context, rnd *rand.Rand, user string, rec *record) {
	for n := 0; ctx.Err() == nil; n++ {
		p := paid{user: user, email: user + "@chaos.test", fen: 100 + rnd.Int64N(5000)}
		body, _ := json.Marshal(map[string]any{"product": "agent-recharge", "amountFen": p.fen, "channel": "ALIPAY", "receiptEmail": p.email})
		st, raw, took := l.call(ctx, http.MethodPost, "/v1/payments/orders", l.tokens[user], "application/json", body, rnd)
		if ctx.Err() != nil && st == 0 {
			return
		}
		rec.status("payments", st, raw, took)
		if st != http.StatusCreated {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		var o struct{ OutTradeNo string }
		if json.Unmarshal(raw, &o) != nil {
			continue
		}
		p.order = o.OutTradeNo
		form := url.Values{"app_id": {chaosAlipayApp}, "out_trade_no": {p.order}, "trade_no": {"T" + p.order},
			"trade_status": {"TRADE_SUCCESS"}, "total_amount": {fmt.Sprintf("%d.%02d", p.fen/100, p.fen%100)},
			"notify_id": {"N" + p.order}, "notify_time": {time.Now().In(time.FixedZone("CST", 8*3600)).Format(time.DateTime)},
			"subject": {"recharge"}}
		sig, err := paynotify.SignAlipay(form, l.keys.AlipayPrivate)
		if err != nil {
			panic(err)
		}
		form.Set("sign_type", "RSA2")
		form.Set("sign", sig)
		for attempt := 0; attempt < cmp.Or(l.notifyTries, 3) && !p.accepted && ctx.Err() == nil; attempt++ {
			copies := 1 + rnd.IntN(2)
			var wg sync.WaitGroup
			var mu sync.Mutex
			for range copies {
				crnd := rand.New(rand.NewPCG(rnd.Uint64(), 1)) // drawn here: rnd is not safe for concurrent use
				wg.Go(func() {
					st, raw, took := l.call(ctx, http.MethodPost, "/v1/payments/notify/alipay", "", "application/x-www-form-urlencoded", []byte(form.Encode()), crnd)
					if ctx.Err() != nil && st == 0 {
						return
					}
					rec.status("payment callbacks", st, raw, took)
					if st == http.StatusOK && string(raw) == "success" {
						mu.Lock()
						p.accepted = true
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if !p.accepted {
				sleep(ctx, 500*time.Millisecond)
			}
		}
		rec.mu.Lock()
		rec.paid = append(rec.paid, p)
		rec.mu.Unlock()
		if !p.accepted {
			return // its order stays pending: the user cannot order again for 30 minutes
		}
	}
}

// codeLoop asks for email codes, each address once.
func (l *loadEnv) codeLoop(ctx context.Context, rnd *rand.Rand, rec *record, g int) {
	for n := 0; ctx.Err() == nil; n++ {
		c := code{email: fmt.Sprintf("code-%d-%d@chaos.test", g, n)}
		st, raw, took := l.call(ctx, http.MethodPost, "/v1/auth/email-codes", "", "application/json",
			fmt.Appendf(nil, `{"email":%q,"scene":"LOGIN"}`, c.email), rnd)
		if ctx.Err() != nil && st == 0 {
			return
		}
		rec.status("email", st, raw, took)
		c.accepted = st == http.StatusAccepted
		rec.mu.Lock()
		rec.codes = append(rec.codes, c)
		rec.mu.Unlock()
		sleep(ctx, time.Duration(100+rnd.IntN(400))*time.Millisecond)
	}
}

// uploadLoop uploads wallpapers for user, five at most (the Spring backend's limit
// per hour).
func (l *loadEnv) uploadLoop(ctx context.Context, rnd *rand.Rand, user string, rec *record) {
	for n := 0; n < 5 && ctx.Err() == nil; n++ {
		body := images.SamplePNG(1000+rnd.IntN(200_000), rnd.Uint64()) // uploads are images, by their bytes
		st, raw, took := l.call(ctx, http.MethodPost, "/v1/objects?kind=wallpaper&name=w"+strconv.Itoa(n)+".png", l.tokens[user], "image/png", body, rnd)
		rec.status("objects", st, raw, took)
		if st == http.StatusCreated {
			var a struct{ ID uint64 }
			if json.Unmarshal(raw, &a) == nil {
				rec.mu.Lock()
				rec.uploads = append(rec.uploads, upload{user: user, id: a.ID, sum: sha256.Sum256(body)})
				rec.mu.Unlock()
			}
		}
		sleep(ctx, time.Duration(500+rnd.IntN(2000))*time.Millisecond)
	}
}

// scoreLoop plays runs of 2048 for user, a session each (a session takes
// one score), and submits their scores: 50 moves in 2 s, at most 60 points
// a move (doc/games.md).
func (l *loadEnv) scoreLoop(ctx context.Context, rnd *rand.Rand, user string, uid int64, rec *record) {
	for n := 0; ctx.Err() == nil; n++ {
		st, raw, took := l.call(ctx, http.MethodPost, "/v1/games/2048/sessions", l.tokens[user], "application/json", []byte("{}"), rnd)
		rec.status("scores", st, raw, took)
		var s struct{ SessionID string }
		if st != http.StatusCreated || json.Unmarshal(raw, &s) != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		sub := submission{user: user, uid: uid, score: rnd.Int64N(60*50 + 1)}
		body := fmt.Appendf(nil, `{"submitId":"%s-%d","sessionId":%q,"score":%d,"durationMs":2000,"moves":50,"clientVersion":"chaos"}`,
			user, n, s.SessionID, sub.score)
		st, raw, took = l.call(ctx, http.MethodPost, "/v1/games/2048/scores", l.tokens[user], "application/json", body, rnd)
		if ctx.Err() != nil && st == 0 {
			return
		}
		rec.status("scores", st, raw, took)
		sub.accepted = st == http.StatusAccepted
		rec.mu.Lock()
		rec.scores = append(rec.scores, sub)
		rec.mu.Unlock()
		sleep(ctx, time.Duration(100+rnd.IntN(300))*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// chaosAlipayApp is the app id the chaos fleet's API expects.
const chaosAlipayApp = "2021000000000077"

// objectState reads an object through the API as an admin: its owner is
// not shown where the stores keep it.
func (l *loadEnv) objectState(user string, id uint64) (replication, replicaURL string) {
	st, raw, _ := l.call(context.Background(), http.MethodGet, fmt.Sprintf("/v1/objects/%d", id), l.admin, "", nil, rand.New(rand.NewPCG(id, 7)))
	if st != http.StatusOK {
		return fmt.Sprintf("HTTP %d", st), ""
	}
	var a struct {
		Replication string
		ReplicaURL  *string `json:"replicaUrl"`
	}
	_ = json.Unmarshal(raw, &a)
	if a.ReplicaURL != nil {
		replicaURL = *a.ReplicaURL
	}
	return a.Replication, replicaURL
}

func chaosUsers(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}
