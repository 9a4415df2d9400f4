package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCPUTimeCountsThisProcesssWork(t *testing.T) {
	// Spin until the kernel's own account (getrusage) shows 100 ms of CPU:
	// on a busy machine a loop of 100 ms of wall time may get much less.
	before, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	start := rusageCPU(t)
	for deadline := time.Now().Add(20 * time.Second); rusageCPU(t)-start < 100*time.Millisecond; {
		require.True(t, time.Now().Before(deadline), "the process got no CPU in 20 s")
	}
	after, err := cpuTime(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, after-before, 80*time.Millisecond, "100 ms of CPU by getrusage shows in /proc (10 ms ticks)")
	rss, peak, err := memory(os.Getpid())
	require.NoError(t, err)
	require.Positive(t, rss)
	require.GreaterOrEqual(t, peak, rss)
}

func TestFindProcessesByCommandName(t *testing.T) {
	comm, err := os.ReadFile("/proc/self/comm")
	require.NoError(t, err)
	name := strings.TrimSpace(string(comm))
	found := findProcesses(map[string]string{name: "me"})
	require.NotEmpty(t, found)
	require.Equal(t, "me", found[0].Name)
	_, err = os.Stat(filepath.Join("/proc", "self"))
	require.NoError(t, err)
}

func TestNumGroupsThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 12345.6: "12,346", 1234567: "1,234,567", -1234: "-1,234"} {
		require.Equal(t, want, num(in), "num(%v)", in)
	}
}

func TestTargetsAreCheckedOnTheRunsFigures(t *testing.T) {
	rep := &Report{
		Seconds:  120,
		Usage:    []Load{{Mode: "closed", InFlight: 32, P99ms: 49}, {Mode: "closed", InFlight: 128, P99ms: 400}},
		EndToEnd: EndToEnd{RatioToRaw: 0.14, CPU: []ProcessCPU{{Process: "api", MsPerRequest: 0.19}}},
		Consumer: Consumer{RatioToBare: 0.31},
		Relay: Relay{Drain: RelayDrain{Rows: 20000, BatchSize: 100, PerSecond: 4000, RatioToRawPublish: 0.2, CPU: []ProcessCPU{{Process: "relay", MsPerRequest: 0.05}}},
			Lag: []RelayLag{
				{IntervalMs: 3000, Default: true, TargetRPS: 1000, InsertRPS: 990, P50ms: 1500, P99ms: 3100, MaxMs: 3200, CPU: []ProcessCPU{{Process: "relay", MsPerRequest: 0.07}}},
				{IntervalMs: 100, TargetRPS: 1000, InsertRPS: 995, P50ms: 60, P99ms: 200, MaxMs: 250},
			}},
	}
	got := map[string]bool{}
	for _, tg := range targets(rep) {
		got[tg.Name] = tg.Met
	}
	require.Equal(t, map[string]bool{
		"usage end to end ÷ raw RabbitMQ end to end":                           false,
		"usage API p99 at 32 in flight (ms)":                                   true,
		"deduct consumer alone ÷ bare consumer (an ack each, as doc/money.md)": true,
		"api CPU per request (ms)":                                             true,
		"outbox relay lag p99 at 1,000 rows/s, default interval 3s (ms)":       false,
		"bench run (s)": true,
	}, got, "the lag at a second interval is a comparison, not a goal")
	var out bytes.Buffer
	rep.Targets = targets(rep)
	require.NoError(t, WriteTable(&out, rep))
	require.Regexp(t, `usage end to end ÷ raw RabbitMQ end to end +0.14 +≥ 0.15 +NOT met`, out.String())
	require.Regexp(t, `outbox relay lag p99 at 1,000 rows/s, default interval 3s \(ms\) +3100 +≤ 200 +NOT met`, out.String())
	require.Regexp(t, `outbox relay drain, 20,000 rows, batch 100 .* +4,000 rows/s +0 msg/s raw publish, confirm window 256 +0.200`, out.String())
	require.Regexp(t, `outbox relay lag at 1,000 rows/s, interval 100ms \(commit to delivery\) +p50 60.0, p99 200.0, p99.9 0.0, max 250.0 ms; 995 rows/s inserted`, out.String())
	require.Regexp(t, `relay +0.050 +0.070 +-`, out.String(), "the relay's CPU per row: drain, then each lag run")
}

// The consumer phase's figures on both subscribers are printed side by
// side, and the watermill-amqp run is in the JSON report beside the fields
// the report had before it.
func TestConsumerReportShowsBothSubscribers(t *testing.T) {
	rep := &Report{
		Baselines: Baselines{BareConsumer: Rate{PerSecond: 20000}, BareConsumerMultiAck: Rate{PerSecond: 40000}},
		Consumer: Consumer{Messages: 19900, PerSecond: 8000, RatioToBare: 0.4, RatioToMulti: 0.2, WorkerCPUms: 0.05, WorkerPeakRSS: 64 << 20,
			WatermillAMQP: &SubscriberRun{Subscriber: "watermill-amqp", Queued: 5000, Messages: 4990, PerSecond: 700, RatioToBare: 0.035,
				RatioToIsle: 0.09, WorkerCPUms: 0.4, WorkerPeakRSS: 40 << 20}},
	}
	var out bytes.Buffer
	require.NoError(t, WriteTable(&out, rep))
	require.Regexp(t, `deduct consumer alone \(worker -handlers agent-billing\) +8,000 msg/s +20,000 msg/s bare consumer, an ack each +0.400`, out.String())
	require.Regexp(t, `deduct consumer alone, WORKER_SUBSCRIBER=watermill-amqp \(5,000 deductions: a quarter\) +700 msg/s +20,000 msg/s bare consumer, an ack each +0.035`, out.String())
	require.Regexp(t, ` +8,000 msg/s on Isle's subscriber +0.090`, out.String())
	require.Contains(t, out.String(), "deduct consumer alone: worker 0.050 ms CPU per message, peak RSS 64 MiB")
	require.Contains(t, out.String(), "deduct consumer alone on watermill-amqp: worker 0.400 ms CPU per message, peak RSS 40 MiB")

	b, err := json.Marshal(rep.Consumer)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.EqualValues(t, 0.4, got["ratio_to_bare_consumer"])
	require.EqualValues(t, 0.05, got["worker_cpu_ms_per_message"])
	wa, _ := got["watermill_amqp"].(map[string]any)
	require.Equal(t, map[string]any{"subscriber": "watermill-amqp", "queued": 5000.0, "messages": 4990.0, "seconds": 0.0, "per_second": 700.0,
		"ratio_to_bare_consumer": 0.035, "ratio_to_isle_subscriber": 0.09, "worker_cpu_ms_per_message": 0.4, "worker_peak_rss_bytes": float64(40 << 20)}, wa)
}

// rusageCPU is the user and system time of this process by getrusage.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()

	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
