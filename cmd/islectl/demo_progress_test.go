package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// On a terminal the line is redrawn in place and ends with a newline; in a
// log every line is a line of its own.
func TestProgressRedrawsOnATerminalOnly(t *testing.T) {
	t.Parallel()
	status := func() (float64, string) { return 0.5, "half" }
	var tty, plain bytes.Buffer
	p := startProgress(&tty, true, "traffic", status)
	time.Sleep(3 * progressTTYEvery)
	p.stop()
	p = startProgress(&plain, false, "traffic", status)
	p.stop()

	require.True(t, strings.HasPrefix(tty.String(), "\rtraffic  [############------------]  50%"), "%q", tty.String())
	require.True(t, strings.HasSuffix(tty.String(), "half\n"), "%q", tty.String())
	require.GreaterOrEqual(t, strings.Count(tty.String(), "\r"), 2)
	require.NotContains(t, plain.String(), "\r")
	require.Equal(t, 1, strings.Count(plain.String(), "\n"))
	require.Equal(t, "effects  [########################] 100%    3s  done", progressLine("effects", 1.5, 3*time.Second, "done"))
	require.Equal(t, "x        [------------------------]   0%    0s  ", progressLine("x", -1, 0, ""))
}

// A message in a retry queue is work still to come back: the demo waits
// for it as for a main queue, so that its summary does not end while a
// failure waits for its next attempt.
func TestEffectsAwaitRetryQueues(t *testing.T) {
	t.Parallel()
	fx := effects{Queued: []queueDepth{{Name: "agent.billing.deduct.retry.queue", Role: topology.RoleRetry, Messages: 1}}}
	require.False(t, fx.complete())
	_, says := fx.progress()
	require.Equal(t, "waiting for: 1 queues not empty", says)
	fx.Queued = []queueDepth{{Name: "agent.billing.deduct.dlq", Role: topology.RoleDLQ, Messages: 1}}
	require.True(t, fx.complete(), "a DLQ's messages are stored by its consumer, not awaited")
}
