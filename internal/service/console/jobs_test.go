package console_test

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

// withJobs gives the console the real outbox-purge job and a runner.
func withJobs(o options) options {
	o.backends = func(d *console.Backends) {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		d.Jobs = []console.Job{{Job: reconcile.NewOutboxPurge(d.DB, reconcile.OutboxPurgeConfig{}, nil, quiet), Schedule: "@every 1h"}}
		d.Runner = reconcile.Runner{Redis: d.Redis, Runs: store.NewJobRuns(d.DB), Log: quiet, Owner: "console-test"}
	}
	return o
}

// The jobs page shows each job's schedule and the leader; "run now" runs
// the job once under its lock, shows its result, records who ran it, and
// is refused without the CSRF token.
func TestRunAJobNow(t *testing.T) {
	t.Parallel()
	b := setup(t, withJobs(options{}))
	ctx := context.Background()
	status, body := b.get(t, "/admin/jobs")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "scheduled @every 1h")
	require.Contains(t, body, "No reconciler leads")
	require.Contains(t, body, "No run recorded yet.")

	status, body = b.post(t, "/admin/jobs/outbox-purge/run", url.Values{})
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "nothing was done")
	runs, err := store.NewJobRuns(b.db).Last(ctx, 5, "outbox-purge")
	require.NoError(t, err)
	require.Empty(t, runs["outbox-purge"], "a refused run does not run")

	token := b.csrf(t, "/admin/jobs")
	status, body = b.post(t, "/admin/jobs/outbox-purge/run", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, html.UnescapeString(body), "outbox-purge ran in")
	require.Contains(t, html.UnescapeString(body), "deleted rows published before 168h0m0s ago")
	require.Contains(t, b.logs.String(), `msg="console: run job" operator=alice job=outbox-purge`)
	runs, err = store.NewJobRuns(b.db).Last(ctx, 5, "outbox-purge")
	require.NoError(t, err)
	require.Len(t, runs["outbox-purge"], 1)
	run := runs["outbox-purge"][0]
	require.Equal(t, "console (alice)", run.StartedBy)
	require.Equal(t, store.JobOK, run.Outcome)

	// The leader, and a run it made, are named; a job whose lock is held
	// elsewhere is not started again.
	l := lease.New(b.redis.Client(keys.LeaderLease.DB), b.redis.Keys().LeaderLease(reconcile.LeaderGroup), time.Minute)
	held, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	leaderRunner := reconcile.Runner{Redis: b.redis, Runs: store.NewJobRuns(b.db), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Owner: "reconcile@host pid 9, lease " + l.Owner()}
	_, err = leaderRunner.Run(ctx, reconcile.NewOutboxPurge(b.db, reconcile.OutboxPurgeConfig{}, nil, leaderRunner.Log), reconcile.StartedBySchedule)
	require.NoError(t, err)
	_, body = b.get(t, "/admin/jobs")
	require.Contains(t, body, "Leader: lease <b>"+l.Owner()+"</b>")
	require.Contains(t, body, `schedule <span class="badge ok">leader</span>`)
	require.Contains(t, body, "console (alice)")

	lock := lease.New(b.redis.Client(keys.JobLock.DB), b.redis.Keys().JobLock("outbox-purge"), time.Minute)
	held, err = lock.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	_, body = b.get(t, "/admin/jobs")
	require.Contains(t, body, "running now")
	status, body = b.post(t, "/admin/jobs/outbox-purge/run", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "running elsewhere right now")
	runs, err = store.NewJobRuns(b.db).Last(ctx, 5, "outbox-purge")
	require.NoError(t, err)
	require.Len(t, runs["outbox-purge"], 2, "the busy try is not a run")

	status, _ = b.post(t, "/admin/jobs/nope/run", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusNotFound, status)
}
