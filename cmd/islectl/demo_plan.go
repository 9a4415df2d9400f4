package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
)

// step is one thing a user (or a gateway) does, at a time from the start.
type step struct {
	at  time.Duration
	run func(ctx context.Context)
}

// spread is n times evenly between the fractions from and to of d.
func spread(n int, d time.Duration, from, to float64) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		f := from
		if n > 1 {
			f += (to - from) * float64(i) / float64(n-1)
		}
		out[i] = time.Duration(f * float64(d))
	}
	return out
}

// perDuration is one per every over d, within lo..hi.
func perDuration(d, every time.Duration, lo, hi int) int {
	return min(max(int(d/every), lo), hi)
}

// plan lays out the run's traffic over the duration: agent usage all
// along, one call at a time and in batches; email codes; a recharge and a pro month per user, paid; an
// identity verification per user; avatars and wallpapers within their
// hourly limits; game sessions with scores
// within 10 a minute per user and game; leaderboard reads near the end.
func (d *demo) plan() []step {
	dur, n := d.flags.duration, len(d.users)
	var steps []step
	add := func(at time.Duration, fn func(ctx context.Context)) { steps = append(steps, step{at: at, run: fn}) }
	offset := func(i int, span time.Duration) time.Duration { return span * time.Duration(i) / time.Duration(n) }

	charges := perDuration(dur, 2*time.Second, 2, 30)
	for i, u := range d.users {
		for j, at := range spread(charges, dur, 0.02, 0.9) {
			add(at+offset(i, 2*time.Second), func(ctx context.Context) { d.chargeUsage(ctx, u, j) })
		}
	}
	for k, at := range spread(perDuration(dur, demoBatchEvery, 1, 12), dur, 0.3, 0.9) {
		add(at, func(ctx context.Context) { d.chargeBatch(ctx, k) })
	}
	for i, at := range spread(d.flags.codes, dur, 0.05, 0.7) {
		add(at, func(ctx context.Context) { d.askCode(ctx, i) })
	}
	if d.keys != nil {
		for i, at := range spread(n, dur, 0.03, 0.3) {
			add(at, func(ctx context.Context) { d.buy(ctx, d.users[i], order.ProductAgentRecharge, int64(1000*(1+i%5))) })
		}
		for i, at := range spread(n, dur, 0.45, 0.7) {
			add(at, func(ctx context.Context) { d.buy(ctx, d.users[i], order.ProductProMonth, d.proPrice) })
		}
	}
	for i, at := range spread(n, dur, 0.25, 0.55) {
		add(at, func(ctx context.Context) { d.verify(ctx, d.users[i]) })
	}
	for i, at := range spread(min(n, 3), dur, 0.1, 0.35) { // 3 avatars an hour per client IP
		add(at, func(ctx context.Context) { d.upload(ctx, d.users[i], store.KindAvatar) })
	}
	for i, at := range spread(n, dur, 0.2, 0.6) {
		add(at, func(ctx context.Context) { d.upload(ctx, d.users[i], store.KindWallpaper) })
	}
	rounds := perDuration(dur, 10*time.Second, 1, 5)
	for g, game := range demoGames {
		for i, u := range d.users {
			for r, at := range spread(rounds, dur, 0.05, 0.8) {
				add(at+offset(i, time.Second)+time.Duration(g)*300*time.Millisecond,
					func(ctx context.Context) { d.play(ctx, u, game, r) })
			}
		}
	}
	for g, game := range demoGames {
		add(time.Duration(0.92*float64(dur)), func(ctx context.Context) { d.readBoard(ctx, d.users[g%n], game) })
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	return steps
}

// traffic runs the plan, demoInFlight steps at most at once, with a
// progress line on e.progress.
func (d *demo) traffic(ctx context.Context, e env) {
	steps := d.plan()
	began := time.Now()
	bar := startProgress(e.progress, isTerminal(e.progress), "traffic", func() (float64, string) {
		d.mu.Lock()
		done := d.stepsDone
		d.mu.Unlock()
		sent, ok, limited := d.api.totals()
		frac := max(float64(done)/float64(len(steps)), min(time.Since(began).Seconds()/d.flags.duration.Seconds(), 0.99))
		if done < len(steps) {
			frac = min(frac, 0.99)
		}
		return frac, fmt.Sprintf("%d/%d steps, %d requests, %d rate limited, %d refused", done, len(steps), sent, limited, sent-ok-limited)
	})
	defer bar.stop()
	slots := make(chan struct{}, demoInFlight)
	var wg sync.WaitGroup
	for _, s := range steps {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(began.Add(s.at))):
		}
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			s.run(ctx)
			d.mu.Lock()
			d.stepsDone++
			d.mu.Unlock()
		}()
	}
	wg.Wait()
	d.trafficEnd = time.Now()
	d.trafficTook = d.trafficEnd.Sub(began)
}
