package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lateTimer is a context whose deadline has passed while its own timer has
// not yet marked it done: what a goroutine sees between a socket's deadline
// (go-redis sets it from the context's) firing and the context's timer
// running, on a loaded machine.
type lateTimer struct {
	context.Context
	deadline time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.deadline, true }

func TestTheDeadlinesCutIsNotAFailure(t *testing.T) {
	ctx := lateTimer{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	require.NoError(t, ctx.Err(), "the timer has not run")
	require.True(t, over(ctx), "a call cut by the deadline is over, not failed")

	require.False(t, over(lateTimer{Context: context.Background(), deadline: time.Now().Add(time.Hour)}))
	require.False(t, over(context.Background()))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	require.True(t, over(cancelled))
}
