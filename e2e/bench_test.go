package e2e_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// islectl bench -short runs every phase against a fleet of its own and
// removes it afterwards. The figures are not checked (machines are noisy and
// a short run is rough): that each phase measured something, and that the
// report has every goal, is.
func TestBenchShortRun(t *testing.T) {
	storetest.Services(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := newFleetEnv(t, storetest.MySQLDSN(t))
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "islectl"), "bench", "-short", "-json", "-users", "20")
	cmd.Env = env.list()
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, stderr)
	var rep struct {
		Baselines map[string]struct {
			PerSecond   float64 `json:"per_second"`
			UsPerCharge float64 `json:"us_per_charge"`
		}
		Usage []struct {
			Mode     string
			InFlight int
			OK       int64
			P99ms    float64 `json:"p99_ms"`
		}
		EndToEnd struct {
			Requests     int64
			RatioToRaw   float64 `json:"ratio_to_raw_end_to_end"`
			RatioToLimit float64 `json:"ratio_to_composite_limit"`
			CPU          []struct {
				Process      string
				PeakRSSBytes int64 `json:"peak_rss_bytes"`
				PeakOfPhase  bool  `json:"peak_rss_of_phase"`
			}
		} `json:"end_to_end"`
		Batched struct {
			Size         int `json:"batch_size"`
			InFlight     int
			Batches      int64
			Charges      int64
			Errors       int64
			PerSecond    float64 `json:"per_second"`
			RatioToRaw   float64 `json:"ratio_to_raw_end_to_end"`
			RatioToLimit float64 `json:"ratio_to_composite_limit"`
			P50ms        float64 `json:"p50_ms"`
			P99ms        float64 `json:"p99_ms"`
			CPU          []struct {
				Process      string
				MsPerRequest float64 `json:"ms_per_request"`
			}
		}
		Tracing struct {
			Skipped        string
			OnRatioToLimit float64 `json:"on_ratio_to_composite_limit"`
			OnPerSecond    float64 `json:"on_per_second"`
			OffPerSecond   float64 `json:"off_per_second"`
			Ratio          float64
			Exports        int64
			OnAPICPU       float64 `json:"on_api_cpu_ms"`
			SampledRatio   float64 `json:"sampled_ratio"`
			SampleRatio    float64 `json:"sample_ratio"`
		}
		Consumer struct {
			Messages      int64
			RatioToBare   float64 `json:"ratio_to_bare_consumer"`
			WatermillAMQP struct {
				Subscriber  string
				Queued      int64
				Messages    int64
				RatioToIsle float64 `json:"ratio_to_isle_subscriber"`
			} `json:"watermill_amqp"`
		}
		Relay struct {
			Domain string
			Drain  struct {
				Rows              int64
				PerSecond         float64 `json:"per_second"`
				RatioToRawPublish float64 `json:"ratio_to_raw_publish"`
				IntervalMs        float64 `json:"interval_ms"`
				CPU               []struct{ Process string }
			}
			Lag []struct {
				IntervalMs float64 `json:"interval_ms"`
				Default    bool
				Rows       int64
				Delivered  int64
				P50ms      float64 `json:"p50_ms"`
				P99ms      float64 `json:"p99_ms"`
				MaxMs      float64 `json:"max_ms"`
				CPU        []struct{ Process string }
			}
		}
		Scores struct {
			Requests     int64
			Errors       int64
			RatioToRaw   float64 `json:"ratio_to_raw_end_to_end"`
			RatioToLimit float64 `json:"ratio_to_composite_limit"`
			Checked      bool
		}
		Targets []struct{ Name string }
	}
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	for _, b := range []string{"raw_publish", "raw_consume", "raw_end_to_end", "redis_deduct", "mysql_batch", "bare_consumer", "bare_consumer_multi_ack"} {
		require.Positive(t, rep.Baselines[b].PerSecond, "baseline %s", b)
	}
	// The composite limit of a charge, from three of them.
	require.Positive(t, rep.Baselines["composite_limit"].PerSecond)
	require.Positive(t, rep.Baselines["composite_limit"].UsPerCharge)
	require.Len(t, rep.Usage, 4, "1, 32 and 128 in flight, then a fixed rate")
	for _, l := range rep.Usage {
		require.Positive(t, l.OK, "%s %d", l.Mode, l.InFlight)
		require.Positive(t, l.P99ms)
	}
	require.EqualValues(t, 2000, rep.EndToEnd.Requests, "-short: a tenth of the default 20,000")
	require.Positive(t, rep.EndToEnd.RatioToRaw)
	require.Positive(t, rep.EndToEnd.RatioToLimit)
	procs := map[string]bool{}
	for _, c := range rep.EndToEnd.CPU {
		procs[c.Process] = true
		if c.Process == "api" || c.Process == "worker" {
			require.True(t, c.PeakOfPhase, "the %s's peak RSS is the phase's own", c.Process)
			require.Positive(t, c.PeakRSSBytes)
		}
	}
	for _, p := range []string{"api", "worker", "rabbitmq", "mariadb", "redis", "bench"} {
		require.True(t, procs[p], "CPU of %s", p)
	}
	// Batches: a tenth of the default 400, of 100 charges each, all charged
	// and in the ledger.
	bt := rep.Batched
	require.Equal(t, 100, bt.Size)
	require.Equal(t, 8, bt.InFlight)
	require.EqualValues(t, 40, bt.Batches)
	require.EqualValues(t, 4000, bt.Charges)
	require.Zero(t, bt.Errors)
	require.Positive(t, bt.PerSecond)
	require.Positive(t, bt.RatioToRaw)
	require.Positive(t, bt.RatioToLimit)
	require.Positive(t, bt.P50ms)
	require.GreaterOrEqual(t, bt.P99ms, bt.P50ms)
	procs = map[string]bool{}
	for _, c := range bt.CPU {
		procs[c.Process] = c.MsPerRequest > 0 || c.Process == "relay"
	}
	for _, p := range []string{"api", "worker", "rabbitmq", "mariadb", "redis", "bench"} {
		require.True(t, procs[p], "batch phase: CPU of %s", p)
	}
	// The end-to-end load again with every span exported: every request
	// charged anew, and spans received.
	require.Empty(t, rep.Tracing.Skipped)
	require.Positive(t, rep.Tracing.OnPerSecond)
	require.Positive(t, rep.Tracing.Ratio)
	require.Positive(t, rep.Tracing.OnRatioToLimit)
	require.Positive(t, rep.Tracing.Exports)
	require.Positive(t, rep.Tracing.OnAPICPU)
	require.Positive(t, rep.Tracing.SampledRatio, "and sampled as compose samples")
	require.InDelta(t, 0.1, rep.Tracing.SampleRatio, 1e-9)
	// Timed from the first ledger row seen to the last: most of the 2,000.
	require.Positive(t, rep.Consumer.Messages)
	require.LessOrEqual(t, rep.Consumer.Messages, int64(2000))
	require.Positive(t, rep.Consumer.RatioToBare)
	// The same consumer on watermill-amqp's subscriber, on a quarter as many.
	wa := rep.Consumer.WatermillAMQP
	require.Equal(t, "watermill-amqp", wa.Subscriber)
	require.EqualValues(t, 500, wa.Queued)
	require.Positive(t, wa.Messages)
	require.LessOrEqual(t, wa.Messages, int64(500))
	require.Positive(t, wa.RatioToIsle)

	// The relay drained a tenth of the default 20,000 rows, then took rows
	// at 1,000/s for a fifth of 10 s at its default interval and the Spring backend's 3 s;
	// every row's message reached the bench's consumer.
	require.Equal(t, "payment-receipt", rep.Relay.Domain)
	require.EqualValues(t, 2000, rep.Relay.Drain.Rows)
	require.Positive(t, rep.Relay.Drain.PerSecond)
	require.Positive(t, rep.Relay.Drain.RatioToRawPublish)
	require.EqualValues(t, 100, rep.Relay.Drain.IntervalMs, "the relay's default interval")
	require.Len(t, rep.Relay.Lag, 2)
	for i, l := range rep.Relay.Lag {
		require.Equal(t, i == 0, l.Default)
		require.Equal(t, []float64{100, 3000}[i], l.IntervalMs)
		require.EqualValues(t, 2000, l.Rows)
		require.Equal(t, l.Rows, l.Delivered, "every row's message delivered")
		require.Positive(t, l.P50ms)
		require.GreaterOrEqual(t, l.P99ms, l.P50ms)
		require.GreaterOrEqual(t, l.MaxMs, l.P99ms)
	}
	for _, cpu := range [][]struct{ Process string }{rep.Relay.Drain.CPU, rep.Relay.Lag[0].CPU, rep.Relay.Lag[1].CPU} {
		procs := map[string]bool{}
		for _, c := range cpu {
			procs[c.Process] = true
		}
		for _, p := range []string{"relay", "mariadb", "rabbitmq"} {
			require.True(t, procs[p], "relay phase: CPU of %s", p)
		}
	}
	// Score submissions: a quarter of the 2,000 requests, at least two per
	// user (20 here), every one applied and each best checked in MySQL, on
	// the board and in the meta hash.
	require.EqualValues(t, 500, rep.Scores.Requests)
	require.Zero(t, rep.Scores.Errors)
	require.Positive(t, rep.Scores.RatioToRaw)
	require.Positive(t, rep.Scores.RatioToLimit)
	require.True(t, rep.Scores.Checked)
	require.Len(t, rep.Targets, 12, "doc/performance.md's: end to end one at a time and batched, the batch's p99, the API's p99, "+
		"the consumer, the api's and the worker's CPU and peak memory, tracing, the relay's lag, the run's time")

	// Nothing of the bench's fleet is left.
	var dbs int
	require.NoError(t, storetest.MySQL(t).Raw("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'isle_bench'").Scan(&dbs).Error)
	require.Zero(t, dbs, "the bench's database was dropped")
	conn, err := amqp.Dial(storetest.AMQPURL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclarePassive("islebench.agent.billing.deduct.queue", true, false, false, false, nil)
	require.Error(t, err, "the bench's queues were deleted")
}

// -phases batch alone runs the batch phase on a fleet of its own: no
// baseline, so no ratio, and no other phase.
func TestBenchBatchPhaseAlone(t *testing.T) {
	storetest.Services(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newFleetEnv(t, storetest.MySQLDSN(t))
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "islectl"), "bench", "-phases", "batch", "-batches", "12", "-batch-size", "150", "-users", "20")
	cmd.Env = env.list()
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, stderr)
	for _, want := range []string{
		// Batches of 150: the bench's fleet takes them (AGENT_USAGE_BATCH_MAX).
		`(?m)^batched usage end to end, 150 a batch, 8 in flight \(first batch to last ledger row\) +[\d,]+ charges/s; batch p50 [\d.]+, p99 [\d.]+`,
		`CPU during the batch phase \(1,800 charges in 12 batches of 150; until every message was handled\)`,
		`(?m)^ +worker +[\d.]+ +[\d.]+ +\d+ +\d+ *$`,
		`(?m)^bench run \(s\) .* met$`,
	} {
		require.Regexp(t, want, string(out))
	}
	for _, not := range []string{"raw RabbitMQ", "composite limit", "usage API", "CPU during the end-to-end phase", "batch p99 at"} {
		require.NotContains(t, string(out), not, "-phases batch measures no %s (a batch of 150 is not the goal's)", not)
	}
}
