package app_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eisland/isle/cmd/internal/app"
	"github.com/eisland/isle/cmd/internal/config"
	"github.com/stretchr/testify/require"
)

type testConfig struct {
	Log config.Log
}

// testBinary is a binary that opens nothing; load reads its configuration.
func testBinary(fs *flag.FlagSet, load func() (testConfig, error)) app.Binary[testConfig] {
	return app.Binary[testConfig]{
		Name:  "test",
		Flags: fs,
		Load:  func(func(string) (string, bool)) (testConfig, error) { return load() },
		Log:   func(c *testConfig) config.Log { return c.Log },
		Needs: func(*testConfig) app.Needs { return app.Needs{} },
	}
}

func noEnv(string) (string, bool) { return "", false }

// The flags come first, then their check, then the configuration: a
// mistake in an earlier one is reported without reading the later ones.
func TestStartReportsTheFirstMistake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	loaded := 0
	load := func() (testConfig, error) { loaded++; return testConfig{}, errors.New("FOO: not a number") }
	quiet := func() *flag.FlagSet {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("mode", "", "")
		return fs
	}

	_, _, err := app.Start(ctx, []string{"-nope"}, noEnv, testBinary(quiet(), load))
	require.ErrorContains(t, err, "flag provided but not defined: -nope")

	b := testBinary(quiet(), load)
	b.CheckFlags = func() error { return errors.New("-mode: want one of a, b") }
	_, _, err = app.Start(ctx, []string{"-mode", "c"}, noEnv, b)
	require.EqualError(t, err, "-mode: want one of a, b")
	require.Zero(t, loaded, "the configuration is not read after a flag's mistake")

	_, _, err = app.Start(ctx, nil, noEnv, testBinary(nil, load))
	require.EqualError(t, err, "configuration:\nFOO: not a number")
	require.Equal(t, 1, loaded)
}

// The operations endpoints answer /healthz over the binary's checks and
// /metrics from its registry, and the profiler only with PPROF_ENABLED.
func TestServeOps(t *testing.T) {
	t.Parallel()
	for _, pprof := range []bool{false, true} {
		b := testBinary(nil, func() (testConfig, error) {
			return testConfig{Log: config.Log{Level: slog.LevelError, Pprof: pprof}}, nil
		})
		warned := false
		b.Warn = func(_ context.Context, log *slog.Logger, _ *testConfig) { warned = log != nil }
		svc, _, err := app.Start(context.Background(), nil, noEnv, b)
		require.NoError(t, err)
		require.True(t, warned, "Warn gets the binary's logger")
		var down atomic.Bool
		ops, err := svc.ServeOps("127.0.0.1:0", app.Check{Name: "extra", Fn: func(context.Context) error {
			if down.Load() {
				return errors.New("down")
			}
			return nil
		}})
		require.NoError(t, err)
		get := func(path string) (int, string) {
			t.Helper()
			res, err := http.Get("http://" + ops.Addr() + path)
			require.NoError(t, err)
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			return res.StatusCode, string(body)
		}
		code, _ := get("/healthz")
		require.Equal(t, http.StatusOK, code)
		down.Store(true)
		code, body := get("/healthz")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Contains(t, body, `"extra":"down"`)

		code, body = get("/metrics")
		require.Equal(t, http.StatusOK, code)
		require.True(t, strings.Contains(body, "\ngo_goroutines ") && strings.Contains(body, "\nprocess_cpu_seconds_total "), "the Go and process collectors")
		code, _ = get("/debug/pprof/")
		require.Equal(t, map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[pprof], code, "pprof %t", pprof)

		ops.Close(svc.Log)
		require.NoError(t, svc.Close())
	}
}
