package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// JobRunsRetention is how long job_run keeps a run: older ones are deleted
// as new runs of the job finish.
const JobRunsRetention = 7 * 24 * time.Hour

// Run outcomes, as job_run.outcome records them.
const (
	JobRunning = "running" // started, not finished (or its process died)
	JobOK      = "ok"
	JobFailed  = "error"
)

// JobRun is one recorded run of a reconciler job (a row of job_run).
type JobRun struct {
	ID         uint64     `gorm:"column:id;primaryKey"`
	Job        string     `gorm:"column:job"`
	StartedBy  string     `gorm:"column:started_by"` // schedule, reconcile -once, console (alice), ...
	Owner      string     `gorm:"column:owner"`      // the process that ran it
	StartedAt  time.Time  `gorm:"column:started_at"`
	FinishedAt *time.Time `gorm:"column:finished_at"`
	Outcome    string     `gorm:"column:outcome"`
	Summary    *string    `gorm:"column:summary"` // the result as text
	Result     *string    `gorm:"column:result"`  // the result as a JSON object, named as in the log
	Error      *string    `gorm:"column:error"`
}

// TableName is the table gorm maps JobRun to.
func (JobRun) TableName() string { return "job_run" }

// Took is how long the run lasted; 0 while it runs.
func (r JobRun) Took() time.Duration {
	if r.FinishedAt == nil {
		return 0
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// JobRuns are the recorded runs of the reconciler's jobs, in MySQL.
type JobRuns struct{ db *gorm.DB }

// NewJobRuns returns the runs recorded in db.
func NewJobRuns(db *gorm.DB) *JobRuns { return &JobRuns{db: db} }

// Start records that a run of job began at at, started by by in the
// process owner, and returns its id.
func (r *JobRuns) Start(ctx context.Context, job, by, owner string, at time.Time) (uint64, error) {
	run := JobRun{Job: job, StartedBy: clipText(by, 128), Owner: clipText(owner, 255), StartedAt: at.UTC(), Outcome: JobRunning}
	if err := r.db.WithContext(ctx).Omit("id").Create(&run).Error; err != nil {
		return 0, fmt.Errorf("store: record the start of %s: %w", job, err)
	}
	return run.ID, nil
}

// JobEnd is how a run ended: its result as text and as a JSON object
// ("" when it had none), and its error.
type JobEnd struct {
	Summary, Result string
	Err             error
}

// Finish records how run id of job ended at at, and deletes the job's runs
// older than JobRunsRetention.
func (r *JobRuns) Finish(ctx context.Context, id uint64, job string, at time.Time, end JobEnd) error {
	upd := map[string]any{"finished_at": at.UTC(), "outcome": JobOK}
	if end.Summary != "" {
		upd["summary"] = clipText(end.Summary, 65535)
	}
	if end.Result != "" {
		upd["result"] = end.Result
	}
	if end.Err != nil {
		upd["outcome"], upd["error"] = JobFailed, clipText(end.Err.Error(), 65535)
	}
	db := r.db.WithContext(ctx)
	if err := db.Model(&JobRun{}).Where("id = ?", id).Updates(upd).Error; err != nil {
		return fmt.Errorf("store: record the end of %s run %d: %w", job, id, err)
	}
	err := db.Where("job = ? AND started_at < ?", job, at.Add(-JobRunsRetention).UTC()).Limit(1000).Delete(&JobRun{}).Error
	if err != nil {
		return fmt.Errorf("store: delete old runs of %s: %w", job, err)
	}
	return nil
}

// Last returns the newest n runs of each job, newest first.
func (r *JobRuns) Last(ctx context.Context, n int, jobs ...string) (map[string][]JobRun, error) {
	out := make(map[string][]JobRun, len(jobs))
	for _, job := range jobs {
		var runs []JobRun
		err := r.db.WithContext(ctx).Where("job = ?", job).Order("started_at DESC, id DESC").Limit(n).Find(&runs).Error
		if err != nil {
			return nil, fmt.Errorf("store: runs of %s: %w", job, err)
		}
		out[job] = runs
	}
	return out, nil
}

// clipText cuts s to at most n bytes at a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
