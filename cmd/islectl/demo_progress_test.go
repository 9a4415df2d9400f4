package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

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
