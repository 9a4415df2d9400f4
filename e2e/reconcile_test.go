package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// runs returns the times of the job runs a reconcile process logged.
func runs(t *testing.T, p *proc, job string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, line := range strings.Split(p.output(), "\n") {
		var l struct {
			Time time.Time
			Msg  string
			Job  string
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "job started" && l.Job == job {
			out = append(out, l.Time)
		}
	}
	return out
}

// Two reconcile processes at once: each scheduled run of a job happens
// once, in the leader; a leader that loses its lease stops running jobs.
func TestTwoReconcilersRunEachJobOnce(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	e["BALANCE_SYNC_SCHEDULE"] = "* * * * * *" // every second
	e["RECONCILE_LEASE_TTL"] = "3s"
	a := start(t, e, "reconcile")
	a.waitFor(t, 30*time.Second, "reconcile started")
	b := start(t, e, "reconcile")
	b.waitFor(t, 30*time.Second, "reconcile started")
	time.Sleep(4500 * time.Millisecond)

	ra, rb := runs(t, a, "balance-sync"), runs(t, b, "balance-sync")
	require.GreaterOrEqual(t, len(ra)+len(rb), 3, "a run a second")
	require.True(t, len(ra) == 0 || len(rb) == 0, "only the leader runs: %d and %d", len(ra), len(rb))
	seconds := map[int64]bool{}
	for _, r := range append(ra, rb...) {
		s := r.Round(time.Second).Unix()
		require.False(t, seconds[s], "the run of %s happened twice", r)
		seconds[s] = true
	}

	// Someone else takes the lease: the leader notices at its next renewal
	// and stops; nobody runs the job while the intruder holds it, and then
	// one of the two takes over.
	leader := a
	if len(ra) == 0 {
		leader = b
	}
	rdb, err := store.OpenRedis(store.RedisConfig{Addr: storetest.RedisAddr(), KeyPrefix: e["REDIS_KEY_PREFIX"]})
	require.NoError(t, err)
	defer rdb.Close()
	took := time.Now()
	require.NoError(t, rdb.Client(keys.LeaderLease.DB).Set(context.Background(), rdb.Keys().LeaderLease("reconcile"), "intruder", 4*time.Second).Err())
	lost := leader.waitFor(t, 5*time.Second, "no longer running the scheduled jobs")
	var l struct{ Time time.Time }
	require.NoError(t, json.Unmarshal([]byte(lost), &l))
	expires := took.Add(4 * time.Second)
	require.Eventually(t, func() bool {
		for _, p := range []*proc{a, b} {
			for _, r := range runs(t, p, "balance-sync") {
				if r.After(expires) {
					return true
				}
			}
		}
		return false
	}, 15*time.Second, 100*time.Millisecond, "nobody took over after the intruder's lease expired")
	for _, p := range []*proc{a, b} {
		for _, r := range runs(t, p, "balance-sync") {
			require.False(t, r.After(l.Time.Add(time.Second)) && r.Before(expires), "a run at %s while the intruder held the lease", r)
		}
	}
	for _, p := range []*proc{a, b} {
		_, err := p.stop(t, 20*time.Second)
		require.NoError(t, err)
	}
}
