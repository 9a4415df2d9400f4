package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
)

// RunsRetention is how long job_run keeps a run: older ones are deleted as
// new runs of the job finish.
const RunsRetention = 7 * 24 * time.Hour

// Run outcomes, as job_run.outcome records them.
const (
	OutcomeRunning = "running" // started, not finished (or its process died)
	OutcomeOK      = "ok"
	OutcomeError   = "error"
)

// Run is one recorded run of a job (a row of job_run).
type Run struct {
	ID         uint64     `gorm:"column:id;primaryKey"`
	Job        string     `gorm:"column:job"`
	StartedBy  string     `gorm:"column:started_by"` // schedule, reconcile -once, console (alice), ...
	Owner      string     `gorm:"column:owner"`      // the process that ran it
	StartedAt  time.Time  `gorm:"column:started_at"`
	FinishedAt *time.Time `gorm:"column:finished_at"`
	Outcome    string     `gorm:"column:outcome"`
	Summary    *string    `gorm:"column:summary"` // the Result as text
	Result     *string    `gorm:"column:result"`  // the Result as a JSON object, named as in the log
	Error      *string    `gorm:"column:error"`
}

// TableName is the table gorm maps Run to.
func (Run) TableName() string { return "job_run" }

// Took is how long the run lasted; 0 while it runs.
func (r Run) Took() time.Duration {
	if r.FinishedAt == nil {
		return 0
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// Runs are the recorded runs of jobs, in MySQL.
type Runs struct{ db *gorm.DB }

// NewRuns returns the runs recorded in db.
func NewRuns(db *gorm.DB) *Runs { return &Runs{db: db} }

// start records that a run began and returns its id.
func (r *Runs) start(ctx context.Context, job, by, owner string, at time.Time) (uint64, error) {
	run := Run{Job: job, StartedBy: clipText(by, 128), Owner: clipText(owner, 255), StartedAt: at.UTC(), Outcome: OutcomeRunning}
	if err := r.db.WithContext(ctx).Omit("id").Create(&run).Error; err != nil {
		return 0, fmt.Errorf("reconcile: record the start of %s: %w", job, err)
	}
	return run.ID, nil
}

// finish records how run id ended, and deletes the job's runs older than
// RunsRetention.
func (r *Runs) finish(ctx context.Context, id uint64, job string, at time.Time, res Result, runErr error) error {
	upd := map[string]any{"finished_at": at.UTC(), "outcome": OutcomeOK}
	if res != nil {
		upd["summary"] = clipText(res.String(), 65535)
		if b, err := json.Marshal(ResultFields(res)); err == nil {
			upd["result"] = string(b)
		}
	}
	if runErr != nil {
		upd["outcome"], upd["error"] = OutcomeError, clipText(runErr.Error(), 65535)
	}
	db := r.db.WithContext(ctx)
	if err := db.Model(&Run{}).Where("id = ?", id).Updates(upd).Error; err != nil {
		return fmt.Errorf("reconcile: record the end of %s run %d: %w", job, id, err)
	}
	err := db.Where("job = ? AND started_at < ?", job, at.Add(-RunsRetention).UTC()).Limit(1000).Delete(&Run{}).Error
	if err != nil {
		return fmt.Errorf("reconcile: delete old runs of %s: %w", job, err)
	}
	return nil
}

// Last returns the newest n runs of each job, newest first.
func (r *Runs) Last(ctx context.Context, n int, jobs ...string) (map[string][]Run, error) {
	out := make(map[string][]Run, len(jobs))
	for _, job := range jobs {
		var runs []Run
		err := r.db.WithContext(ctx).Where("job = ?", job).Order("started_at DESC, id DESC").Limit(n).Find(&runs).Error
		if err != nil {
			return nil, fmt.Errorf("reconcile: runs of %s: %w", job, err)
		}
		out[job] = runs
	}
	return out, nil
}

// ResultFields is a Result as the JSON object `reconcile -once -json` prints
// and job_run keeps: its log value's attributes, groups as objects, and
// durations as Go durations ("1.5s"), as the log writes them.
func ResultFields(res Result) any { return attrValue(res.LogValue()) }

func attrValue(v slog.Value) any {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindGroup:
		m := make(map[string]any)
		for _, a := range v.Group() {
			m[a.Key] = attrValue(a.Value)
		}
		return m
	}
	return v.Any()
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
