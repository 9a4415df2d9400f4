package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// countResult is a job's result: how many items it saw.
type countResult struct{ Seen int }

func (r countResult) String() string       { return fmt.Sprintf("seen %d", r.Seen) }
func (r countResult) LogValue() slog.Value { return slog.GroupValue(slog.Int("seen", r.Seen)) }

// stubJob returns what run returns.
type stubJob struct {
	name string
	run  func(ctx context.Context) (reconcile.Result, error)
}

func (j stubJob) Name() string                                          { return j.name }
func (j stubJob) RunOnce(ctx context.Context) (reconcile.Result, error) { return j.run(ctx) }

// Each run is recorded with who started it, where it ran, when it started
// and ended, and its result or error; a busy job records nothing; runs
// older than a week go as new ones finish.
func TestRunnerRecordsEachRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.MySQL(t)
	rdb := storetest.Redis(t)
	runs := store.NewJobRuns(db)
	runner := reconcile.Runner{Redis: rdb, Runs: runs, Log: discard, Owner: "reconcile@test pid 1"}
	old := time.Now().Add(-store.JobRunsRetention - time.Hour).UTC()
	require.NoError(t, db.Exec("INSERT INTO job_run (job, started_by, owner, started_at, outcome) VALUES ('count', 'schedule', 'gone', ?, 'ok')", old).Error)

	res, err := runner.Run(ctx, stubJob{"count", func(context.Context) (reconcile.Result, error) { return countResult{Seen: 7}, nil }}, "console (alice)")
	require.NoError(t, err)
	require.Equal(t, countResult{Seen: 7}, res)
	boom := errors.New("mysql went away")
	_, err = runner.Run(ctx, stubJob{"count", func(context.Context) (reconcile.Result, error) { return countResult{Seen: 2}, boom }}, reconcile.StartedBySchedule)
	require.ErrorIs(t, err, boom)

	last, err := runs.Last(ctx, 10, "count", "other")
	require.NoError(t, err)
	require.Empty(t, last["other"])
	require.Len(t, last["count"], 2, "the week-old run was deleted")
	failed, ok := last["count"][0], last["count"][1]
	require.Equal(t, store.JobOK, ok.Outcome)
	require.Equal(t, "console (alice)", ok.StartedBy)
	require.Equal(t, "reconcile@test pid 1", ok.Owner)
	require.Equal(t, "seen 7", *ok.Summary)
	require.JSONEq(t, `{"seen":7}`, *ok.Result)
	require.Nil(t, ok.Error)
	require.NotNil(t, ok.FinishedAt)
	require.GreaterOrEqual(t, ok.Took(), time.Duration(0))
	require.Equal(t, store.JobFailed, failed.Outcome)
	require.Equal(t, "mysql went away", *failed.Error)
	require.Equal(t, "seen 2", *failed.Summary)

	// While a run holds the job's lock, another is busy and not recorded;
	// the running one is recorded as running, and its lock is visible.
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := runner.Run(ctx, stubJob{"slow", func(context.Context) (reconcile.Result, error) {
			close(started)
			<-release
			return countResult{}, nil
		}}, "reconcile -once")
		done <- err
	}()
	<-started
	_, err = runner.Run(ctx, stubJob{"slow", func(context.Context) (reconcile.Result, error) { panic("must not run") }}, "schedule")
	require.ErrorIs(t, err, reconcile.ErrBusy)
	holder, err := reconcile.Running(ctx, rdb, "slow")
	require.NoError(t, err)
	require.NotEmpty(t, holder.Owner)
	require.Positive(t, holder.TTL)
	last, err = runs.Last(ctx, 10, "slow")
	require.NoError(t, err)
	require.Len(t, last["slow"], 1)
	require.Equal(t, store.JobRunning, last["slow"][0].Outcome)
	require.Nil(t, last["slow"][0].FinishedAt)
	close(release)
	require.NoError(t, <-done)
	holder, err = reconcile.Running(ctx, rdb, "slow")
	require.NoError(t, err)
	require.Zero(t, holder)
}

func TestCurrentLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := storetest.Redis(t)
	h, err := reconcile.CurrentLeader(ctx, rdb)
	require.NoError(t, err)
	require.Zero(t, h, "nobody leads")
	l := lease.New(rdb.Client(keys.LeaderLease.DB), rdb.Keys().LeaderLease(reconcile.LeaderGroup), 15*time.Second)
	held, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	h, err = reconcile.CurrentLeader(ctx, rdb)
	require.NoError(t, err)
	require.Equal(t, l.Owner(), h.Owner)
	require.InDelta(t, 15*time.Second, h.TTL, float64(2*time.Second))
}
