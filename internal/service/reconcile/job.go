package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
)

// Result is what one run of a job did, for logs and people.
type Result interface {
	fmt.Stringer
	slog.LogValuer
}

// Job is one periodic job.
type Job interface {
	Name() string
	RunOnce(ctx context.Context) (Result, error)
}

// ErrBusy is returned when another process runs the job right now.
var ErrBusy = errors.New("reconcile: the job is running elsewhere")

// jobLockTTL bounds how long a crashed runner keeps a job locked; a live
// runner renews the lock at a third of it (lease.Lease.Hold).
const jobLockTTL = time.Minute

// Runner runs jobs once each, under the job's lock, logging, counting and
// recording each run. The scheduler, `reconcile -once` and the operator
// console's "run now" all run jobs through one, so a run never overlaps
// another of the same job, wherever each was started.
type Runner struct {
	Redis   *store.Redis
	Runs    *store.JobRuns // nil: runs are not recorded
	Metrics *Metrics
	Log     *slog.Logger
	Owner   string // this process, as job_run.owner records it
}

// Run runs job once under its lock (isle:job-lock:{job}); by says who asked
// (schedule, reconcile -once, console (alice)). ErrBusy means another
// runner holds the lock: nothing ran, and nothing is recorded. A run that
// cannot be recorded still runs (logged).
func (r Runner) Run(ctx context.Context, job Job, by string) (Result, error) {
	lock := lease.New(r.Redis.Client(keys.JobLock.DB), r.Redis.Keys().JobLock(job.Name()), jobLockTTL)
	held, err := lock.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if !held {
		r.Metrics.run(job.Name(), "busy", 0)
		return nil, ErrBusy
	}
	ctx, release := lock.Hold(ctx, func(why string) {
		r.Log.Error("job lock lost; stopping the run", "job", job.Name(), "why", why)
	})
	defer release()

	began := time.Now()
	var runID uint64
	if r.Runs != nil {
		if runID, err = r.Runs.Start(ctx, job.Name(), by, r.Owner, began); err != nil {
			r.Log.Warn("job run not recorded", "job", job.Name(), "err", err)
		}
	}
	r.Log.Info("job started", "job", job.Name(), "by", by)
	res, err := job.RunOnce(ctx)
	took := time.Since(began)
	if runID != 0 {
		if rerr := r.Runs.Finish(context.WithoutCancel(ctx), runID, job.Name(), began.Add(took), end(res, err)); rerr != nil {
			r.Log.Warn("job run's end not recorded", "job", job.Name(), "err", rerr)
		}
	}
	if err != nil {
		r.Metrics.run(job.Name(), "error", took)
		r.Log.Error("job failed", "job", job.Name(), "took", took.Round(time.Millisecond), "err", err, "result", res)
		return res, err
	}
	r.Metrics.run(job.Name(), "ok", took)
	r.Log.Info("job finished", "job", job.Name(), "took", took.Round(time.Millisecond), "result", res)
	return res, nil
}
