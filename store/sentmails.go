package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// ErrMailSending is returned when another delivery of the mail holds its
// lock and is sending it now: try again later, and find it sent.
var ErrMailSending = errors.New("store: another delivery is sending this mail")

// SentMails remembers the verification-code mails sent, by their dispatch
// key, for keys.CodeMailSentTTL (Redis database 2: verify:mail:sent): the
// email consumer sends each once however often its message comes.
type SentMails struct{ r *Redis }

// NewSentMails returns the sent mails of r.
func NewSentMails(r *Redis) *SentMails { return &SentMails{r: r} }

// SendOnce calls send unless the mail named key was sent, and then records
// it sent. Concurrent calls for one key meet on a lock: one sends, the
// others get ErrMailSending. sent reports whether this call sent it. A
// send that succeeded but could not be recorded returns its error, and a
// retry may send the mail again: at least once, never lost. send gets a
// context that ends before the lock does.
func (m *SentMails) SendOnce(ctx context.Context, key string, send func(context.Context) error) (sent bool, err error) {
	c := m.r.Client(keys.CodeMailSent.DB)
	marker := m.r.Keys().Key(keys.CodeMailSent, key)
	if done, err := m.sent(ctx, c, marker); err != nil || done {
		return false, err
	}
	lock, err := lease.Acquire(ctx, c, m.r.Keys().Key(keys.CodeMailLock, key), keys.CodeMailLockTTL)
	switch {
	case errors.Is(err, lease.ErrHeld):
		return false, ErrMailSending
	case err != nil:
		return false, fmt.Errorf("store: mail %s lock: %w", key, err)
	}
	defer lock.ReleaseDetached(ctx)
	if done, err := m.sent(ctx, c, marker); err != nil || done { // sent while we took the lock
		return false, err
	}
	sctx, cancel := context.WithTimeout(ctx, keys.CodeMailLockTTL-5*time.Second)
	defer cancel()
	if err := send(sctx); err != nil {
		return false, err
	}
	if err := c.Set(context.WithoutCancel(ctx), marker, "1", keys.CodeMailSentTTL).Err(); err != nil {
		return true, fmt.Errorf("store: mail %s sent; recording it failed: %w", key, err)
	}
	return true, nil
}

func (m *SentMails) sent(ctx context.Context, c *redis.Client, marker string) (bool, error) {
	n, err := c.Exists(ctx, marker).Result()
	if err != nil {
		return false, fmt.Errorf("store: mail sent? %w", err)
	}
	return n == 1, nil
}
