package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
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
		Seconds: 120,
		Usage:   []Load{{Mode: "closed", InFlight: 32, P99ms: 39}, {Mode: "closed", InFlight: 128, P99ms: 400}},
		EndToEnd: EndToEnd{RatioToRaw: 0.08, CPU: []ProcessCPU{
			{Process: "api", MsPerRequest: 0.19, PeakRSSBytes: 50 << 20},
			{Process: "worker", MsPerRequest: 0.14, PeakRSSBytes: 61 << 20},
			{Process: "rabbitmq", MsPerRequest: 0.4, PeakRSSBytes: 200 << 20},
		}},
		Batched:  Batched{Size: 100, InFlight: 8, Charges: 40000, RatioToRaw: 0.17, P99ms: 151},
		Consumer: Consumer{RatioToBare: 0.26},
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
		"batched usage end to end ÷ raw RabbitMQ end to end":                   true,
		"batch p99 at 8 in flight, 100 a batch (ms)":                           false,
		"usage API p99 at 32 in flight (ms)":                                   true,
		"deduct consumer alone ÷ bare consumer (an ack each, as doc/money.md)": true,
		"api CPU per request, end to end (ms)":                                 true,
		"worker CPU per request, end to end (ms)":                              false,
		"api peak RSS, end to end (MiB)":                                       true,
		"worker peak RSS, end to end (MiB)":                                    false,
		"outbox relay lag p99 at 1,000 rows/s, default interval 3s (ms)":       false,
		"bench run (s)": true,
	}, got, "the lag at a second interval is a comparison, not a goal; the services' memory is not the fleet's")
	var out bytes.Buffer
	rep.Targets = targets(rep)
	require.NoError(t, WriteTable(&out, rep))
	require.Regexp(t, `usage end to end ÷ raw RabbitMQ end to end +0.08 +≥ 0.085 +NOT met`, out.String())
	require.Regexp(t, `batched usage end to end ÷ raw RabbitMQ end to end +0.17 +≥ 0.16 +met`, out.String())
	require.Regexp(t, `batch p99 at 8 in flight, 100 a batch \(ms\) +151 +≤ 150 +NOT met`, out.String())
	require.Regexp(t, `usage API p99 at 32 in flight \(ms\) +39 +≤ 40 +met`, out.String())
	require.Regexp(t, `deduct consumer alone ÷ bare consumer .* +0.26 +≥ 0.25 +met`, out.String())
	require.Regexp(t, `worker CPU per request, end to end \(ms\) +0.14 +≤ 0.13 +NOT met`, out.String())
	require.Regexp(t, `worker peak RSS, end to end \(MiB\) +61 +≤ 60 +NOT met`, out.String())
	require.Regexp(t, `outbox relay lag p99 at 1,000 rows/s, default interval 3s \(ms\) +3100 +≤ 200 +NOT met`, out.String())
	require.Regexp(t, `outbox relay drain, 20,000 rows, batch 100 .* +4,000 rows/s +0 msg/s raw publish, confirm window 256 +0.200`, out.String())
	require.Regexp(t, `outbox relay lag at 1,000 rows/s, interval 100ms \(commit to delivery\) +p50 60.0, p99 200.0, p99.9 0.0, max 250.0 ms; 995 rows/s inserted`, out.String())
	require.Regexp(t, `relay +0.050 +0.070 +-`, out.String(), "the relay's CPU per row: drain, then each lag run")

	// A batch of another size, or at another number in flight, is a
	// comparison: the batch goals are the default's.
	rep.Batched.InFlight = 16
	for _, tg := range targets(rep) {
		require.NotContains(t, tg.Name, "batch")
	}
}

// The composite limit of a charge is made of the run's three baselines,
// and every end-to-end figure is printed against it as well as against
// raw RabbitMQ end to end; the batch phase has its row, its latency and
// its CPU per charge, and the JSON report carries them.
func TestBatchedReportShowsTheCompositeLimit(t *testing.T) {
	b := Baselines{RawEndToEnd: Rate{PerSecond: 32000}, RedisDeduct: Rate{PerSecond: 50000}, MySQLBatch: Rate{PerSecond: 100000}}
	b.Limit = compositeLimit(b)
	// 2 ÷ 32,000 + 1 ÷ 50,000 + 2 ÷ 100,000 = 62.5 + 20 + 20 µs.
	require.InDelta(t, 62.5, b.Limit.MessagesUs, 1e-9)
	require.InDelta(t, 20, b.Limit.DeductUs, 1e-9)
	require.InDelta(t, 20, b.Limit.RowsUs, 1e-9)
	require.InDelta(t, 102.5, b.Limit.UsPerCharge, 1e-9)
	require.InDelta(t, 1e6/102.5, b.Limit.PerSecond, 1e-6)
	require.Zero(t, compositeLimit(Baselines{RawEndToEnd: b.RawEndToEnd, RedisDeduct: b.RedisDeduct}), "no MySQL baseline, no limit")

	r := &run{report: Report{Baselines: b}}
	toRaw, toLimit := r.ratios(4000)
	require.InDelta(t, 0.125, toRaw, 1e-9)
	require.InDelta(t, 0.41, toLimit, 1e-9)
	rep := &Report{
		Baselines: b,
		EndToEnd:  EndToEnd{InFlight: 64, Requests: 20000, PerSecond: 2400, RatioToRaw: 0.075, RatioToLimit: 0.246},
		Batched: Batched{Size: 100, InFlight: 8, Batches: 400, Charges: 40000, PerSecond: 6000, RatioToRaw: 0.1875, RatioToLimit: 0.615,
			P50ms: 60.5, P99ms: 120.25, P999ms: 140, CPU: []ProcessCPU{
				{Process: "api", Cores: 0.5, MsPerRequest: 0.05, RSSBytes: 40 << 20, PeakRSSBytes: 45 << 20, PeakOfPhase: true},
				{Process: "worker", Cores: 0.4, MsPerRequest: 0.075, RSSBytes: 30 << 20, PeakRSSBytes: 35 << 20, PeakOfPhase: true},
				{Process: "mariadb", Cores: 0.3, MsPerRequest: 0.025, RSSBytes: 300 << 20, PeakRSSBytes: 400 << 20},
			}},
		Scores: Scores{InFlight: 32, Requests: 5000, PerSecond: 3000, RatioToRaw: 0.094, RatioToLimit: 0.3075},
		Tracing: Tracing{OnPerSecond: 2300, OffPerSecond: 2400, Ratio: 0.958, OnRatioToRaw: 0.072, OffRatioToRaw: 0.075, OnRatioToLimit: 0.236, OffRatioToLimit: 0.246,
			SampleRatio: 0.1, SampledPerSecond: 2376, SampledRatio: 0.99},
	}
	var out bytes.Buffer
	require.NoError(t, WriteTable(&out, rep))
	s := out.String()
	require.Regexp(t, `composite limit of a charge: 2 messages at raw end to end \+ 1 deduct.lua \+ 2 rows in 100-row INSERTs +9,756 charges/s \(62.5 \+ 20.0 \+ 20.0 = 102.5 µs\)`, s)
	require.Regexp(t, `usage end to end, 64 in flight \(first request to last ledger row\) +2,400 req/s +32,000 msg/s raw end to end +0.075\n +9,756 charges/s composite limit +0.246\n`, s)
	require.Regexp(t, `batched usage end to end, 100 a batch, 8 in flight \(first batch to last ledger row\) +6,000 charges/s; batch p50 60.5, p99 120.2, p99.9 140.0 ms +32,000 msg/s raw end to end +0.188\n`+
		` +9,756 charges/s composite limit +0.615\n +2,400 req/s usage end to end +2.500\n`, s)
	require.Regexp(t, `usage end to end, sampled over OTLP \(parentbased_traceidratio 0.1\) +2,376 req/s +2,400 req/s exporting none +0.990\n`, s)
	require.Regexp(t, `usage end to end, every span exported over OTLP +2,300 req/s +2,400 req/s exporting none +0.958\n +32,000 msg/s raw end to end +0.072 \(exporting none 0.075\)\n +9,756 charges/s composite limit +0.236 \(exporting none 0.246\)`, s)
	require.Regexp(t, `score submissions end to end, 32 in flight .* +3,000 req/s; p99 0.0 ms +32,000 msg/s raw end to end +0.094\n +9,756 charges/s composite limit +0.307`, s)
	require.Contains(t, s, "CPU during the batch phase (40,000 charges in 400 batches of 100; until every message was handled)")
	require.Regexp(t, `process +cores +ms CPU per charge +RSS MiB +peak RSS MiB`, s)
	require.Regexp(t, `worker +0.40 +0.075 +30 +35`, s)
	require.Regexp(t, `all +0.150`, s, "the fleet's and the services' CPU per charge added up")
	require.Contains(t, s, "of mariadb since it started", "a peak the bench could not reset says so")
	require.NotContains(t, s, "CPU during the end-to-end phase", "the phase measured no CPU here")

	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	var got struct {
		Baselines struct {
			Limit map[string]float64 `json:"composite_limit"`
		}
		EndToEnd map[string]any `json:"end_to_end"`
		Batched  map[string]any
		Scores   map[string]any
		Tracing  map[string]any
	}
	require.NoError(t, json.Unmarshal(raw, &got))
	require.InDelta(t, 102.5, got.Baselines.Limit["us_per_charge"], 1e-9)
	require.InDelta(t, 1e6/102.5, got.Baselines.Limit["per_second"], 1e-6)
	require.InDelta(t, 0.246, got.EndToEnd["ratio_to_composite_limit"], 1e-9)
	require.InDelta(t, 0.3075, got.Scores["ratio_to_composite_limit"], 1e-9)
	require.InDelta(t, 0.236, got.Tracing["on_ratio_to_composite_limit"], 1e-9)
	for k, v := range map[string]float64{"batch_size": 100, "inflight": 8, "batches": 400, "charges": 40000, "per_second": 6000,
		"ratio_to_raw_end_to_end": 0.1875, "ratio_to_composite_limit": 0.615, "p50_ms": 60.5, "p99_ms": 120.25} {
		require.InDelta(t, v, got.Batched[k], 1e-9, k)
	}
	cpu, _ := got.Batched["cpu"].([]any)
	require.Len(t, cpu, 3)
	require.Equal(t, true, cpu[0].(map[string]any)["peak_rss_of_phase"])
}

// A batch's answer counts the items answered 200 and names the first that
// was not; an answer with another number of results is an error.
func TestBatchAnswersAreCountedByItem(t *testing.T) {
	n, err := batchAnswered([]byte(`{"results":[{"status":200,"charge":{}},{"status":402,"error":{"code":"payment_required"}},{"status":200}]}`), 3)
	require.EqualValues(t, 2, n)
	require.ErrorContains(t, err, `batch item 1: HTTP 402: {"code":"payment_required"}`)
	n, err = batchAnswered([]byte(`{"results":[{"status":200},{"status":200}]}`), 2)
	require.EqualValues(t, 2, n)
	require.NoError(t, err)
	_, err = batchAnswered([]byte(`{"results":[{"status":200}]}`), 2)
	require.ErrorContains(t, err, "a batch of 2 items answered 1 results")
	_, err = batchAnswered([]byte(`not json`), 1)
	require.Error(t, err)
}

// A batch of the bench is size usage records, numbered on from the last
// batch's, to the users in turn.
func TestUsageBatchNumbersItsCharges(t *testing.T) {
	r := &run{id: "bx", url: "http://api", token: "tok", users: []string{"u0", "u1", "u2"}}
	req := r.usageBatch("batch", 4)(2)
	require.Equal(t, "http://api/v1/agent/usage/batch", req.url)
	require.Equal(t, 4, req.items)
	require.Equal(t, "Bearer tok", req.header.Get("Authorization"))
	var body struct {
		Items []struct {
			RequestID string `json:"requestId"`
			Username  string `json:"username"`
			ModelName string `json:"modelName"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(req.body, &body))
	require.Len(t, body.Items, 4)
	for k, it := range body.Items {
		n := 4 + k
		require.Equal(t, fmt.Sprintf("bx-batch-%d", n), it.RequestID)
		require.Equal(t, r.users[n%3], it.Username)
		require.Equal(t, benchModel, it.ModelName)
	}
	require.JSONEq(t, `{"items":[]}`, string(r.usageBatch("probe", 0)(1).body))
}

// A phase's peak memory is its own: the bench resets the high-water mark of
// a process it owns when the phase begins. The process measured is a child
// that maps 128 MiB, touches it and unmaps it, then waits: nothing else runs
// in it, so its resident set after the unmap is its base, whatever the test
// binary (its garbage collector, the race detector's shadow memory, other
// tests' goroutines) does meanwhile.
func TestResetPeakForgetsAnEarlierPeak(t *testing.T) {
	if os.Getenv(peakChildEnv) != "" {
		peakChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestResetPeakForgetsAnEarlierPeak$")
	cmd.Env = append(os.Environ(), peakChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "unmapped\n", line)
	pid := cmd.Process.Pid

	rss, before, err := memory(pid)
	require.NoError(t, err)
	require.GreaterOrEqual(t, before, rss+100<<20, "the child's peak holds the 128 MiB it unmapped")
	require.NoError(t, resetPeak(pid))
	_, after, err := memory(pid)
	require.NoError(t, err)
	require.Less(t, after, before-100<<20, "the 128 MiB peak is forgotten")
	m := startCPU([]process{{Name: "child", PID: pid}})
	require.True(t, m.reset[pid])
	require.True(t, m.stop(1)[0].PeakOfPhase)
}

const peakChildEnv = "ISLE_BENCH_PEAK_CHILD"

// peakChild is TestResetPeakForgetsAnEarlierPeak's child: 128 MiB mapped,
// every page written, unmapped, then a line to the parent and a wait for
// the parent to close stdin.
func peakChild() {
	const size = 128 << 20
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Println("mmap:", err)
		os.Exit(1)
	}
	for i := 0; i < size; i += os.Getpagesize() {
		mem[i] = 1
	}
	if err := syscall.Munmap(mem); err != nil {
		fmt.Println("munmap:", err)
		os.Exit(1)
	}
	fmt.Println("unmapped")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
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
