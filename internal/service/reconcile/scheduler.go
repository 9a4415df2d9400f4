package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/robfig/cron/v3"
)

// Schedule is one job on a cron spec ("@every 30m", "0 */5 * * * *" with
// optional seconds, or the usual five fields).
type Schedule struct {
	Spec string
	Job  Job
}

// StartedBySchedule is how job_run names a run the scheduler started.
const StartedBySchedule = "schedule"

// Parser reads the schedules: standard cron with an optional seconds field,
// and descriptors (@every, @hourly, ...).
var Parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Scheduler fires jobs on their schedules, in the leader only.
type Scheduler struct {
	cron   *cron.Cron
	leader *Leader
	runner Runner
	log    *slog.Logger
}

// NewScheduler registers the schedules; a bad spec is an error naming it.
// Each tick runs its job through runner, as started by "schedule".
func NewScheduler(leader *Leader, runner Runner, schedules ...Schedule) (*Scheduler, error) {
	log := runner.Log
	s := &Scheduler{
		cron:   cron.New(cron.WithParser(Parser), cron.WithChain(cron.Recover(cronLogger{log}), cron.SkipIfStillRunning(cronLogger{log}))),
		leader: leader, runner: runner, log: log,
	}
	var errs []error
	for _, sc := range schedules {
		job := sc.Job
		if _, err := s.cron.AddFunc(sc.Spec, func() { s.fire(job) }); err != nil {
			errs = append(errs, fmt.Errorf("schedule of %s %q: %w", job.Name(), sc.Spec, err))
		}
	}
	return s, errors.Join(errs...)
}

// fire runs a job if this process leads; a follower skips the tick.
func (s *Scheduler) fire(job Job) {
	ctx, ok := s.leader.Context()
	if !ok {
		s.log.Debug("not the leader; skipping", "job", job.Name())
		return
	}
	if _, err := s.runner.Run(ctx, job, StartedBySchedule); errors.Is(err, ErrBusy) {
		s.log.Info("job still running elsewhere; skipping this tick", "job", job.Name())
	}
}

// Run fires jobs until ctx ends, then waits for the running ones.
func (s *Scheduler) Run(ctx context.Context) {
	s.cron.Start()
	<-ctx.Done()
	<-s.cron.Stop().Done()
}

type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append(kv, "err", err)...)
}
