package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// replicationIDSpace is the UUID namespace of the replication messages'
// ids. Changing it changes the id of every task's message.
var replicationIDSpace = uuid.MustParse("6f1c1c5e-2d0a-4d8e-9a57-0b7a3c6f1e21")

// ReplicationMessageID is the AMQP message id of task's
// ObjectReplicationMessage: the same for every publish of the task, by the
// relay or the backfill, so a duplicate can be told by its id.
func ReplicationMessageID(task uint64) string {
	return uuid.NewSHA1(replicationIDSpace, []byte("object_replication_task:"+strconv.FormatUint(task, 10))).String()
}

// StuckTasks returns up to limit replication tasks, lowest id first, that
// are pending or failed, were last updated more than olderThan ago (by the
// database's clock) and have had fewer than maxAttempts attempts: tasks whose
// message is presumably lost (replication-backfill). A done task is never
// returned, nor one whose message is dead and not replayed (its row in
// object_replication_log, by message id): that one is the operator's to
// replay, and republishing it would only add dead messages. The index
// idx_object_replication_task_stuck serves the query.
func (o *Objects) StuckTasks(ctx context.Context, olderThan time.Duration, maxAttempts, limit int) ([]ReplicationTask, error) {
	var tasks []ReplicationTask
	err := o.db.WithContext(ctx).Raw(`SELECT t.* FROM object_replication_task t JOIN (
			SELECT id FROM object_replication_task
			WHERE status IN (?, ?) AND updated_at < NOW(6) - INTERVAL ? MICROSECOND AND attempts < ?
			ORDER BY id LIMIT ?) s ON s.id = t.id
		ORDER BY t.id`, TaskPending, TaskFailed, olderThan.Microseconds(), maxAttempts, limit).Scan(&tasks).Error
	if err != nil {
		return nil, fmt.Errorf("store: stuck replication tasks: %w", err)
	}
	if len(tasks) == 0 {
		return nil, nil
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = ReplicationMessageID(t.ID)
	}
	var dead []string
	if err := o.db.WithContext(ctx).Raw("SELECT message_id FROM object_replication_log WHERE message_id IN ? AND replayed_at IS NULL",
		ids).Scan(&dead).Error; err != nil {
		return nil, fmt.Errorf("store: dead replication messages: %w", err)
	}
	if len(dead) == 0 {
		return tasks, nil
	}
	isDead := map[string]bool{}
	for _, id := range dead {
		isDead[id] = true
	}
	live := tasks[:0]
	for _, t := range tasks {
		if !isDead[ReplicationMessageID(t.ID)] {
			live = append(live, t)
		}
	}
	return live, nil
}

// TouchTasks sets updated_at to now on the tasks of ids that are not done,
// and changes nothing else: a republished task then waits a whole threshold
// before replication-backfill takes it again. It returns how many it touched.
func (o *Objects) TouchTasks(ctx context.Context, ids []uint64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res := o.db.WithContext(ctx).Exec("UPDATE object_replication_task SET updated_at = NOW(6) WHERE id IN ? AND status IN (?, ?)",
		ids, TaskPending, TaskFailed)
	if res.Error != nil {
		return 0, fmt.Errorf("store: touch %d replication tasks: %w", len(ids), res.Error)
	}
	return res.RowsAffected, nil
}

// Task returns the replication task id, or ErrNotFound.
func (o *Objects) Task(ctx context.Context, id uint64) (ReplicationTask, error) {
	var task ReplicationTask
	err := o.db.WithContext(ctx).Take(&task, id).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return task, fmt.Errorf("store: replication task %d: %w", id, ErrNotFound)
	case err != nil:
		return task, fmt.Errorf("store: replication task %d: %w", id, err)
	}
	return task, nil
}

// FinishTask marks task done with its replica's URL and sets its object's
// replica_url, in one transaction, at now. A task another delivery
// finished first is left as it is, and so is its object.
func (o *Objects) FinishTask(ctx context.Context, task ReplicationTask, replica string, now time.Time) error {
	err := o.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&ReplicationTask{}).Where("id = ? AND status <> ?", task.ID, TaskDone).Updates(map[string]any{
			"status": TaskDone, "target_url": replica, "done_at": now.UTC(), "attempts": gorm.Expr("attempts + 1"), "last_error": nil,
		})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return tx.Model(&StoredObject{}).Where("id = ?", task.ObjectID).Update("replica_url", replica).Error
	})
	if err != nil {
		return fmt.Errorf("store: mark replication task %d done: %w", task.ID, err)
	}
	return nil
}

// FailTask records a failed attempt on the task id, unless it is done:
// failed, one more attempt, and cause (clipped by the caller to fit).
func (o *Objects) FailTask(ctx context.Context, id uint64, cause string) error {
	err := o.db.WithContext(ctx).Model(&ReplicationTask{}).Where("id = ? AND status <> ?", id, TaskDone).Updates(map[string]any{
		"status": TaskFailed, "attempts": gorm.Expr("attempts + 1"), "last_error": cause,
	}).Error
	if err != nil {
		return fmt.Errorf("store: record a failed attempt on replication task %d: %w", id, err)
	}
	return nil
}
