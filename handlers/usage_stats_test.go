package handlers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// fakeUsage counts a request id once, as agent_usage_event does.
type fakeUsage struct {
	seen  map[string]bool
	fail  error
	hashd []string
}

func (u *fakeUsage) CountUsages(_ context.Context, us []store.Usage) ([]bool, []error) {
	counted, errs := make([]bool, len(us)), make([]error, len(us))
	for i, x := range us {
		switch {
		case u.fail != nil:
			errs[i] = u.fail
		case !u.seen[x.RequestID]:
			u.seen[x.RequestID], counted[i] = true, true
		}
	}
	return counted, errs
}

func (u *fakeUsage) IncrUsage(_ context.Context, us []store.Usage) error {
	for _, x := range us {
		u.hashd = append(u.hashd, x.RequestID)
	}
	return nil
}

func TestUsageStatsCountsARequestOnce(t *testing.T) {
	t.Parallel()
	u := &fakeUsage{seen: map[string]bool{}}
	h := handlers.NewUsageRecorder(u, u, quiet)
	msg := topology.AgentUsageStats{RequestID: "alice:r1", ModelName: "m", InputTokens: 3}
	require.NoError(t, h.Handle(context.Background(), msg))
	require.NoError(t, h.Handle(context.Background(), msg), "a redelivery")
	require.Equal(t, []string{"alice:r1"}, u.hashd, "the Redis hash counts it once too")

	u.fail = errors.New("mysql down")
	require.Error(t, h.Handle(context.Background(), topology.AgentUsageStats{RequestID: "alice:r2", ModelName: "m"}))
}
