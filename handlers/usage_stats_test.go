package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
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
	require.Equal(t, []string{"req:alice:r1"}, u.hashd, "the Redis hash counts it once too")

	u.fail = errors.New("mysql down")
	require.Error(t, h.Handle(context.Background(), topology.AgentUsageStats{RequestID: "alice:r2", ModelName: "m"}))
}

// The usage of a request whose user is named "msg" (its request id
// "msg:X") and the usage of a message without a request id whose message
// id is "X" are two usages: their keys never meet, whatever the names.
func TestUsageKeysOfRequestsAndOfMessagesNeverMeet(t *testing.T) {
	t.Parallel()
	u := &fakeUsage{seen: map[string]bool{}}
	h := handlers.NewUsageRecorder(u, u, quiet)
	foreign := messaging.WithDelivery(context.Background(), messaging.Delivery{MessageID: "X"})
	require.NoError(t, h.Handle(foreign, topology.AgentUsageStats{ModelName: "m", InputTokens: 1}))
	for _, user := range []string{"msg", "sha256"} {
		require.NoError(t, h.Handle(context.Background(), topology.AgentUsageStats{RequestID: user + ":X", ModelName: "m", InputTokens: 1}))
	}
	long := strings.Repeat("r", 255)
	require.NoError(t, h.Handle(context.Background(), topology.AgentUsageStats{RequestID: long, ModelName: "m", InputTokens: 1}))
	require.NoError(t, h.Handle(messaging.WithDelivery(context.Background(), messaging.Delivery{MessageID: long}),
		topology.AgentUsageStats{ModelName: "m", InputTokens: 1}))
	require.Len(t, u.hashd, 5, "five usages counted: %q", u.hashd)
}
