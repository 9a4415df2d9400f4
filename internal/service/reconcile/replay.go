package reconcile

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/eisland/isle/internal/service/dlq"
)

// DLQReplay is the dlq-replay job (OBJECT_REPLICATION_DLQ_REPLAY_*,
// off by default): it republishes a domain's stored dead messages that were
// not replayed yet, at most Batch per run.
type DLQReplay struct {
	store  *dlq.Store
	pub    dlq.Republish
	domain string
	batch  int
}

// NewDLQReplay returns the job for one domain.
func NewDLQReplay(s *dlq.Store, pub dlq.Republish, domain string, batch int) *DLQReplay {
	return &DLQReplay{store: s, pub: pub, domain: domain, batch: batch}
}

// Name is "dlq-replay".
func (j *DLQReplay) Name() string { return "dlq-replay" }

// ReplayResult is what one run replayed.
type ReplayResult struct {
	Domain string
	dlq.Result
}

func (r ReplayResult) String() string {
	return fmt.Sprintf("%s: replayed %d, skipped %d, failed %d", r.Domain, r.Replayed, r.Skipped, r.Failed)
}

// LogValue implements slog.LogValuer.
func (r ReplayResult) LogValue() slog.Value {
	return slog.GroupValue(slog.String("domain", r.Domain), slog.Int("replayed", r.Replayed),
		slog.Int("skipped", r.Skipped), slog.Int("failed", r.Failed))
}

// RunOnce replays up to Batch rows.
func (j *DLQReplay) RunOnce(ctx context.Context) (Result, error) {
	res, err := j.store.ReplayAll(ctx, j.pub, j.domain, false, j.batch)
	return ReplayResult{Domain: j.domain, Result: res}, err
}
