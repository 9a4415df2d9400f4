package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/eisland/isle/cmd/islectl/internal/bench"
	"github.com/eisland/isle/internal/service/httpapi"
)

// runBench measures the billing path against raw baselines in one run and
// prints a table, or the report as JSON (-json). Progress goes to stderr.
func runBench(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(e.out)
	url := fs.String("url", "", "a running fleet's API (e.g. http://127.0.0.1:8080); default: start a fleet of its own from -bin")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	short := fs.Bool("short", false, "a quick run with a tenth of the work (the figures are rough)")
	keep := fs.Bool("keep", false, "own fleet: keep its database, keys, queues and logs")
	bin := fs.String("bin", "", "own fleet: the directory of the api, worker and relay binaries (default: islectl's own)")
	pprof := fs.Bool("pprof", false, "own fleet: serve Go's profiler on the api's, worker's and relay's operations addresses (printed)")
	dir := fs.String("dir", "", "own fleet: where its logs go (default: a new temporary directory)")
	users := fs.Int("users", bench.UsersDefault, "users the requests spread over")
	requests := fs.Int("requests", bench.RequestsDefault, "requests of the end-to-end phase, and deductions of the consumer phase")
	raw := fs.Int("raw", bench.RawMessagesDefault, "messages of each raw RabbitMQ baseline")
	phase := fs.Duration("phase", bench.PhaseDefault, "length of each timed load phase")
	inflight := fs.Int("e2e-inflight", bench.E2EInFlightDefault, "requests in flight in the end-to-end phase")
	batches := fs.Int("batches", bench.BatchesDefault, "batch phase: batches sent")
	batchSize := fs.Int("batch-size", bench.BatchSizeDefault, "batch phase: charges a batch (own fleet: AGENT_USAGE_BATCH_MAX is raised to it)")
	batchInFlight := fs.Int("batch-inflight", bench.BatchInFlightDefault, "batch phase: batches in flight")
	relayRows := fs.Int("relay-rows", bench.RelayRowsDefault, "relay phase: outbox rows of the backlog the relay drains")
	relayRate := fs.Int("relay-rate", bench.RelayRateDefault, "relay phase: outbox rows inserted per second to measure the lag")
	relayLag := fs.Duration("relay-lag", bench.RelayLagDefault, "relay phase: how long rows are inserted at -relay-rate, at each interval")
	relayInterval := fs.Duration("relay-interval", bench.RelayIntervalDefault, "relay phase: a second poll interval measured beside the relay's default (the Spring backend's 3s by default; skipped when equal)")
	phases := fs.String("phases", strings.Join(bench.Phases, ","), "the phases to run, comma-separated; a ratio needs its baseline's phase")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("bench takes no arguments")
	}
	bc := bench.Config{
		URL: *url, BinDir: *bin, Dir: *dir, Keep: *keep, Pprof: *pprof,
		Users: *users, RawMessages: *raw, Requests: *requests, Phase: *phase, E2EInFlight: *inflight, Progress: e.progress,
		Batches: *batches, BatchSize: *batchSize, BatchInFlight: *batchInFlight,
		RelayRows: *relayRows, RelayRate: *relayRate, RelayLag: *relayLag, RelayInterval: *relayInterval,
	}
	if err := checkBench(bc); err != nil {
		return err
	}
	var err error
	if bc.Phases, err = benchPhases(*phases); err != nil {
		return err
	}
	if *short {
		bc.Requests, bc.RawMessages, bc.Phase = max(100, bc.Requests/10), max(100, bc.RawMessages/10), max(100*time.Millisecond, bc.Phase/5)
		bc.RelayRows, bc.RelayLag = max(100, bc.RelayRows/10), max(100*time.Millisecond, bc.RelayLag/5)
		bc.Batches = max(10, bc.Batches/10)
	}
	cfg, _, err := load(e)
	if err != nil {
		return err
	}
	bc.MySQL, bc.Redis, bc.AMQPURL, bc.Topology = cfg.MySQL, cfg.Redis.RedisConfig, cfg.AMQP.URL, cfg.AMQP.Topology
	if *url != "" {
		if bc.JWTSecret, err = cfg.JWT.Key(); err != nil {
			return fmt.Errorf("bench -url needs the fleet's token key: %w", err)
		}
	} else if bc.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		bc.BinDir = filepath.Dir(exe)
	}
	rep, err := bench.Run(ctx, bc)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return bench.WriteTable(e.out, rep)
}

// checkBench refuses flags outside the bounds the bench can measure with.
func checkBench(bc bench.Config) error {
	switch {
	case bc.Users < 1 || bc.Users > 100_000, bc.Requests < 100 || bc.Requests > 10_000_000, bc.RawMessages < 100 || bc.RawMessages > 10_000_000:
		return usagef("bench: -users 1..100000, -requests and -raw 100..10000000")
	case bc.Phase < 100*time.Millisecond || bc.Phase > 10*time.Minute, bc.E2EInFlight < 1 || bc.E2EInFlight > 4096:
		return usagef("bench: -phase 100ms..10m, -e2e-inflight 1..4096")
	case bc.Batches < 1 || bc.Batches > 1_000_000, bc.BatchSize < 1 || bc.BatchSize > httpapi.UsageBatchMaxLimit, bc.BatchInFlight < 1 || bc.BatchInFlight > 1024:
		return usagef("bench: -batches 1..1000000, -batch-size 1..%d (the API's most), -batch-inflight 1..1024", httpapi.UsageBatchMaxLimit)
	case bc.RelayRows < 100 || bc.RelayRows > 10_000_000, bc.RelayRate < 1 || bc.RelayRate > 100_000:
		return usagef("bench: -relay-rows 100..10000000, -relay-rate 1..100000")
	case bc.RelayLag < 100*time.Millisecond || bc.RelayLag > 10*time.Minute, bc.RelayInterval < 10*time.Millisecond || bc.RelayInterval > time.Hour:
		return usagef("bench: -relay-lag 100ms..10m, -relay-interval 10ms..1h (the relay's own bounds)")
	case bc.RelayInterval%time.Millisecond != 0:
		return usagef("bench: -relay-interval: whole milliseconds (OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS)")
	}
	return nil
}

// benchPhases reads -phases: names of bench.Phases, comma-separated.
func benchPhases(spec string) ([]string, error) {
	var only []string
	for _, p := range strings.Split(spec, ",") {
		if p = strings.TrimSpace(p); !slices.Contains(bench.Phases, p) {
			return nil, usagef("bench: -phases: no phase %q; the phases are %s", p, strings.Join(bench.Phases, ", "))
		}
		only = append(only, p)
	}
	return only, nil
}
