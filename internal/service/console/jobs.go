package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
)

// Job is one of the reconciler's jobs, as the console shows and runs it.
type Job struct {
	Job      reconcile.Job
	Schedule string // the cron spec the reconciler runs it on; "" = not scheduled (run on demand)
}

// JobRunner runs a job once under its lock (reconcile.Runner).
type JobRunner interface {
	Run(ctx context.Context, job reconcile.Job, by string) (reconcile.Result, error)
}

// jobsData is the jobs page.
type jobsData struct {
	Leader    reconcile.Holder
	LeaderErr string
	Jobs      []jobRow
	CanRun    bool
}

// jobRow is one job with its state and last runs.
type jobRow struct {
	Name     string
	Schedule string
	Running  reconcile.Holder
	Runs     []store.JobRun
	ByLeader map[uint64]bool // the runs the current leader made
}

// runsShown is how many runs of each job the page lists.
const runsShown = 5

func (c *Console) jobs(w http.ResponseWriter, r *http.Request) (rendered, error) {
	ctx := r.Context()
	d := jobsData{CanRun: c.backends.Runner != nil}
	var err error
	if d.Leader, err = reconcile.CurrentLeader(ctx, c.backends.Redis); err != nil {
		d.LeaderErr = err.Error()
	}
	names := make([]string, len(c.backends.Jobs))
	for i, j := range c.backends.Jobs {
		names[i] = j.Job.Name()
	}
	runs, err := store.NewJobRuns(c.backends.DB).Last(ctx, runsShown, names...)
	if err != nil {
		return rendered{}, err
	}
	for _, j := range c.backends.Jobs {
		row := jobRow{Name: j.Job.Name(), Schedule: j.Schedule, Runs: runs[j.Job.Name()], ByLeader: map[uint64]bool{}}
		if row.Running, err = reconcile.Running(ctx, c.backends.Redis, row.Name); err != nil {
			return rendered{}, err
		}
		for _, run := range row.Runs {
			if d.Leader.Owner != "" && strings.Contains(run.Owner, d.Leader.Owner) {
				row.ByLeader[run.ID] = true
			}
		}
		d.Jobs = append(d.Jobs, row)
	}
	return rendered{file: "jobs.html", title: "Jobs", nav: "jobs", data: d}, nil
}

// runWait is how long "run now" waits for the run to end before it shows
// the page; a longer run goes on, and the jobs page shows it running.
const runWait = 10 * time.Second

// runTimeout bounds a run started from the console, which outlives the
// request that started it.
const runTimeout = time.Hour

// ranData is the page of a run started from the console.
type ranData struct {
	Job      string
	Done     bool
	Busy     bool
	Result   string
	Err      string
	Took     time.Duration
	Operator string
}

// runJob runs a job now, once, under its lock (as `reconcile -once` does):
// a job running elsewhere is not started again.
func (c *Console) runJob(w http.ResponseWriter, r *http.Request) (rendered, error) {
	if c.backends.Runner == nil {
		return rendered{}, errorf(http.StatusServiceUnavailable, "this console cannot run jobs")
	}
	name := r.PathValue("name")
	var job reconcile.Job
	for _, j := range c.backends.Jobs {
		if j.Job.Name() == name {
			job = j.Job
		}
	}
	if job == nil {
		return rendered{}, errorf(http.StatusNotFound, "no job %q", name)
	}
	who := c.backends.Operator(r)
	type outcome struct {
		res reconcile.Result
		err error
	}
	done := make(chan outcome, 1)
	began := time.Now()
	c.backends.Log.InfoContext(r.Context(), "console: run job", "operator", who, "job", name)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), runTimeout)
		defer cancel()
		res, err := c.backends.Runner.Run(ctx, job, "console ("+who+")")
		c.backends.Log.InfoContext(ctx, "console: job run ended", "operator", who, "job", name, "err", err, "took", time.Since(began))
		done <- outcome{res, err}
	}()
	d := ranData{Job: name, Operator: who}
	select {
	case o := <-done:
		d.Done, d.Took = true, time.Since(began)
		if o.res != nil {
			d.Result = o.res.String()
		}
		switch {
		case errors.Is(o.err, reconcile.ErrBusy):
			d.Busy = true
		case o.err != nil:
			d.Err = o.err.Error()
		}
	case <-time.After(runWait):
	case <-r.Context().Done():
	}
	return rendered{file: "ran.html", title: "Run " + name, nav: "jobs", data: d}, nil
}
