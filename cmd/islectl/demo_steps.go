package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/eisland/isle/game"
	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
)

// The games the demo plays, in the order of the summary.
var demoGames = []string{"2048", "tetris", "snake"}

// demoScenes are the scenes of the email codes, one per pass over the users
// (the API allows one code a minute per address and scene).
var demoScenes = []string{"LOGIN", "REGISTER", "RESET_PASSWORD", "CHANGE_EMAIL", "UNREGISTER"}

// retryEvery is how often a charge is sent twice, as a client that lost the
// answer does: the API answers the copy as a replay and deducts nothing.
const retryEvery = 5

// chargeUsage charges a model call to u through POST /v1/agent/usage, as
// the agent gateway does with its service token.
func (d *demo) chargeUsage(ctx context.Context, u demoUser, j int) {
	body := usageBody(fmt.Sprintf("demo-%s-%s-%03d", d.run, u.Name, j), u.Name)
	sends := 1
	if j%retryEvery == 2 {
		sends = 2
	}
	for range sends {
		a := d.api.postJSON(ctx, "usage", "/v1/agent/usage", d.service, body, nil)
		var ch struct {
			DeductedFen string `json:"deductedFen"`
			Replayed    bool   `json:"replayed"`
		}
		if a.Status != http.StatusOK || a.decode(&ch) != nil {
			return
		}
		deducted, err := decimal.NewFromString(ch.DeductedFen)
		if err != nil {
			return
		}
		d.mu.Lock()
		switch {
		case ch.Replayed:
			d.replays++
		case deducted.IsPositive():
			d.charges++
			d.alone = append(d.alone, body)
			fallthrough
		default:
			d.usageIDs = append(d.usageIDs, store.UsageRequestID(u.Name, body["requestId"].(string))) // the usage message's request id
		}
		d.mu.Unlock()
	}
}

// askCode asks for the i-th email code: each user's address in turn, a
// new scene on each pass. Past the API's 3 an hour per client IP, the
// request claims another address in X-Forwarded-For, which only an API
// that trusts a proxy on this machine believes (API_TRUSTED_PROXIES=127.0.0.1:
// the demo's request then looks like one nginx passed on).
func (d *demo) askCode(ctx context.Context, i int) {
	u := d.users[i%len(d.users)]
	scene := demoScenes[(i/len(d.users))%len(demoScenes)]
	var h http.Header
	if i >= demoCodesDefault {
		h = http.Header{"X-Forwarded-For": {fmt.Sprintf("198.51.100.%d", 1+i/demoCodesDefault)}}
	}
	a := d.api.postJSON(ctx, "email codes", "/v1/auth/email-codes", "", map[string]string{"email": u.Email, "scene": scene}, h)
	if a.Status == http.StatusAccepted {
		d.mu.Lock()
		d.codesTo = append(d.codesTo, u.Email)
		d.mu.Unlock()
	}
}

// verify records a passed identity verification of u, as the service that
// asked the provider does: the pass and its material's message commit
// together, and the worker stores the material (doc/objects.md).
func (d *demo) verify(ctx context.Context, u demoUser) {
	certify := fmt.Sprintf("demo-%s-%s", d.run, u.Name)
	material := make([]byte, 48)
	crand.Read(material) // never fails (crypto/rand, Go 1.24+)
	a := d.api.postJSON(ctx, "identity", "/v1/identity/verifications/"+certify+"/result", d.service, map[string]string{
		"username": u.Name, "status": store.IdentityPassed,
		"materialInfo": `{"enc":"` + base64.StdEncoding.EncodeToString(material) + `"}`,
	}, nil)
	if a.Status == http.StatusOK {
		d.mu.Lock()
		d.certified = append(d.certified, certify)
		d.mu.Unlock()
	}
}

// demoObject is an upload the API took.
type demoObject struct {
	ID   uint64
	Kind string
	User demoUser
}

// upload sends u's avatar or wallpaper, a small generated PNG.
func (d *demo) upload(ctx context.Context, u demoUser, kind string) {
	w, h := 96, 96
	if kind == store.KindWallpaper {
		w, h = 320, 180
	}
	var user int // a name not demo-N draws user 0's picture
	_, _ = fmt.Sscanf(u.Name, "demo-%d", &user)
	body, err := demoPNG(w, h, user)
	if err != nil {
		return
	}
	a := d.api.do(ctx, apiCall{kind: "objects", method: http.MethodPost, token: u.Token, body: body, contentType: "image/png",
		path: "/v1/objects?" + url.Values{"kind": {kind}, "name": {kind + ".png"}}.Encode()})
	var obj struct {
		ID uint64 `json:"id"`
	}
	if a.Status != http.StatusCreated || a.decode(&obj) != nil {
		return
	}
	d.mu.Lock()
	d.objects = append(d.objects, demoObject{ID: obj.ID, Kind: kind, User: u})
	d.mu.Unlock()
}

// demoPNG is a w×h gradient in a hue of its own for each user.
func demoPNG(w, h, user int) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	base := [3]int{40 + 53*user%200, 90 + 71*user%160, 150 + 37*user%100}
	for y := range h {
		for x := range w {
			t := (x + y) * 255 / (w + h)
			img.Set(x, y, color.RGBA{R: uint8((base[0] + t) % 256), G: uint8((base[1] + t/2) % 256), B: uint8(base[2]), A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// play starts a session of game for u, plays a little and submits the
// run: a plausible one for the game (doc/games.md, game.Session.CheckRun).
func (d *demo) play(ctx context.Context, u demoUser, game string, round int) {
	a := d.api.do(ctx, apiCall{kind: "game sessions", method: http.MethodPost, path: "/v1/games/" + game + "/sessions", token: u.Token})
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if a.Status != http.StatusCreated || a.decode(&sess) != nil {
		return
	}
	began := time.Now()
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(200+rand.IntN(600)) * time.Millisecond):
	}
	score, durationMs, moves := demoRun(game, time.Since(began))
	a = d.api.postJSON(ctx, "scores", "/v1/games/"+game+"/scores", u.Token, map[string]any{
		"submitId": fmt.Sprintf("demo-%s-%s-%s-%d", d.run, u.Name, game, round), "sessionId": sess.SessionID,
		"score": score, "durationMs": durationMs, "moves": moves, "clientVersion": "islectl-demo",
	}, nil)
	if a.Status != http.StatusAccepted {
		return
	}
	d.mu.Lock()
	k := [2]string{u.Name, game}
	d.best[k] = max(d.best[k], score)
	d.mu.Unlock()
}

// demoRun is a run of game played for about played: it may claim up to 5 s
// more than the session's age, no move faster than the game allows and no
// more points a move than it can make.
func demoRun(gameID string, played time.Duration) (score, durationMs int64, moves int32) {
	g, _ := game.Lookup(gameID)
	durationMs = played.Milliseconds() + 1000 + rand.Int64N(3500)
	fastest := 1000 / g.MovesPerSecond // ms a move at the game's pace
	moves = int32(durationMs / (fastest * (2 + rand.Int64N(4))))
	perMove := map[string]int64{"2048": 4 + rand.Int64N(28), "tetris": 5 + rand.Int64N(60), "snake": 1 + rand.Int64N(9)}[gameID]
	score = int64(moves) * min(perMove, g.PointsPerMove)
	return score, durationMs, moves
}

// readBoard reads a leaderboard as a player does after a game.
func (d *demo) readBoard(ctx context.Context, u demoUser, game string) {
	d.api.do(ctx, apiCall{kind: "leaderboard", method: http.MethodGet, path: "/v1/games/" + game + "/leaderboard?limit=5", token: u.Token})
}
