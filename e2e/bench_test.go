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
			PerSecond float64 `json:"per_second"`
		}
		Usage []struct {
			Mode     string
			InFlight int
			OK       int64
			P99ms    float64 `json:"p99_ms"`
		}
		EndToEnd struct {
			Requests   int64
			RatioToRaw float64 `json:"ratio_to_raw_end_to_end"`
			CPU        []struct{ Process string }
		} `json:"end_to_end"`
		Tracing struct {
			Skipped      string
			OnPerSecond  float64 `json:"on_per_second"`
			OffPerSecond float64 `json:"off_per_second"`
			Ratio        float64
			Exports      int64
			OnAPICPU     float64 `json:"on_api_cpu_ms"`
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
			Requests   int64
			Errors     int64
			RatioToRaw float64 `json:"ratio_to_raw_end_to_end"`
			Checked    bool
		}
		Targets []struct{ Name string }
	}
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	for _, b := range []string{"raw_publish", "raw_consume", "raw_end_to_end", "redis_deduct", "mysql_batch", "bare_consumer", "bare_consumer_multi_ack"} {
		require.Positive(t, rep.Baselines[b].PerSecond, "baseline %s", b)
	}
	require.Len(t, rep.Usage, 4, "1, 32 and 128 in flight, then a fixed rate")
	for _, l := range rep.Usage {
		require.Positive(t, l.OK, "%s %d", l.Mode, l.InFlight)
		require.Positive(t, l.P99ms)
	}
	require.EqualValues(t, 2000, rep.EndToEnd.Requests, "-short: a tenth of the default 20,000")
	require.Positive(t, rep.EndToEnd.RatioToRaw)
	procs := map[string]bool{}
	for _, c := range rep.EndToEnd.CPU {
		procs[c.Process] = true
	}
	for _, p := range []string{"api", "worker", "rabbitmq", "mariadb", "redis", "bench"} {
		require.True(t, procs[p], "CPU of %s", p)
	}
	// The end-to-end load again with every span exported: every request
	// charged anew, and spans received.
	require.Empty(t, rep.Tracing.Skipped)
	require.Positive(t, rep.Tracing.OnPerSecond)
	require.Positive(t, rep.Tracing.Ratio)
	require.Positive(t, rep.Tracing.Exports)
	require.Positive(t, rep.Tracing.OnAPICPU)
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
	require.True(t, rep.Scores.Checked)
	require.Len(t, rep.Targets, 7, "the five of doc/performance.md, the cost of tracing, and the relay's lag at its default interval")

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
