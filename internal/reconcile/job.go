package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/lease"
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

// RunJob runs job once under its lock (isle:job-lock:{job}), logging and
// counting the result. ErrBusy means another runner holds the lock.
func RunJob(ctx context.Context, rdb *store.Redis, job Job, m *Metrics, log *slog.Logger) (Result, error) {
	lock := lease.New(rdb.Client(keys.JobLock.DB), rdb.Keys().JobLock(job.Name()), jobLockTTL)
	held, err := lock.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if !held {
		m.run(job.Name(), "busy", 0)
		return nil, ErrBusy
	}
	ctx, release := lock.Hold(ctx, func(why string) {
		log.Error("job lock lost; stopping the run", "job", job.Name(), "why", why)
	})
	defer release()

	began := time.Now()
	log.Info("job started", "job", job.Name())
	res, err := job.RunOnce(ctx)
	took := time.Since(began)
	if err != nil {
		m.run(job.Name(), "error", took)
		log.Error("job failed", "job", job.Name(), "took", took.Round(time.Millisecond), "err", err, "result", res)
		return res, err
	}
	m.run(job.Name(), "ok", took)
	log.Info("job finished", "job", job.Name(), "took", took.Round(time.Millisecond), "result", res)
	return res, nil
}
