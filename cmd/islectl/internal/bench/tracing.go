package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// Tracing is the cost of exporting traces: usage end to end with the api
// and the worker exporting over OTLP/HTTP (to a receiver in the bench that
// takes them and keeps nothing), sampled as the compose file and the
// Kubernetes manifests sample (parentbased_traceidratio at
// TracingSampleRatio) and with every span, against the same load with no
// endpoint configured (doc/tracing.md). Each side runs tracingRounds times,
// in turn, each time on an api and a worker started for it and warmed up,
// and each round in the reverse order of the one before, so that no side
// is favoured by warm processes or by the drift of the run (the ledger
// growing, the machine's other load).
type Tracing struct {
	Skipped      string  `json:"skipped,omitempty"`
	Rounds       int     `json:"rounds"`
	OffPerSecond float64 `json:"off_per_second"` // usage end to end, nothing exported
	OnPerSecond  float64 `json:"on_per_second"`  // the same, every span exported
	Ratio        float64 `json:"ratio"`          // on ÷ off
	// The same, sampled at the root (SampleRatio of the traces that begin
	// in Isle; the bench's requests carry no trace context).
	SampleRatio      float64 `json:"sample_ratio"`
	SampledPerSecond float64 `json:"sampled_per_second"`
	SampledRatio     float64 `json:"sampled_ratio"` // sampled ÷ off
	// Each side ÷ raw RabbitMQ end to end and ÷ the composite limit.
	OffRatioToRaw   float64 `json:"off_ratio_to_raw_end_to_end"`
	OffRatioToLimit float64 `json:"off_ratio_to_composite_limit"`
	OnRatioToRaw    float64 `json:"on_ratio_to_raw_end_to_end"`
	OnRatioToLimit  float64 `json:"on_ratio_to_composite_limit"`
	Exports         int64   `json:"exports"` // OTLP requests the receiver got
	Bytes           int64   `json:"bytes"`
	OffAPICPU       float64 `json:"off_api_cpu_ms"` // api CPU per request, ms
	OnAPICPU        float64 `json:"on_api_cpu_ms"`
	OffWorkerCPU    float64 `json:"off_worker_cpu_ms"`
	OnWorkerCPU     float64 `json:"on_worker_cpu_ms"`
	SampledAPICPU   float64 `json:"sampled_api_cpu_ms"`
	SampledWorker   float64 `json:"sampled_worker_cpu_ms"`
}

// TracingSampleRatio is the ratio the compose file and the Kubernetes
// manifests sample at (OTEL_TRACES_SAMPLER_ARG).
const TracingSampleRatio = 0.1

// tracingRounds is how many times each side of the tracing phase runs (an
// even number: the order reverses from one round to the next).
const tracingRounds = 2

// tracing runs usage end to end with tracing off and on, tracingRounds
// times each, then starts the api and the worker again as they were.
func (r *run) tracing(ctx context.Context) error {
	t := &r.report.Tracing
	if r.fleet == nil {
		t.Skipped = "needs the bench's own fleet"
		r.logf("tracing: skipped: %s", t.Skipped)
		return nil
	}
	sink, err := newOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	sampled := []string{"OTEL_TRACES_SAMPLER=parentbased_traceidratio", fmt.Sprintf("OTEL_TRACES_SAMPLER_ARG=%g", TracingSampleRatio)}
	every := []string{"OTEL_TRACES_SAMPLER=parentbased_always_on", "OTEL_TRACES_SAMPLER_ARG="}
	var off, samp, on []EndToEnd
	type arm struct {
		name, endpoint string
		sampler        []string
		runs           *[]EndToEnd
	}
	sides := []arm{{"off", "", nil, &off}, {"sampled", sink.url, sampled, &samp}, {"on", sink.url, every, &on}}
	// restart stops the processes of the run before, which flush their last
	// spans as they stop, and starts them again with env; it logs what the
	// stopped processes exported, from their start to their stop.
	var stopped string
	var exports, bytes int64
	restart := func(next string, env ...string) error {
		err := r.fleet.restartAPIAndWorker(ctx, env...)
		if stopped != "" {
			r.logf("tracing: %s exported %d requests, %d KiB", stopped, sink.requests.Load()-exports, (sink.bytes.Load()-bytes)>>10)
		}
		stopped, exports, bytes = next, sink.requests.Load(), sink.bytes.Load()
		return err
	}
	for round := range tracingRounds {
		for _, side := range sides {
			phase := fmt.Sprintf("e2e-tracing-%s-%d", side.name, round)
			if err := restart(phase, append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + side.endpoint}, side.sampler...)...); err != nil {
				return err
			}
			e, err := r.warmedEndToEnd(ctx, phase, side.endpoint)
			if err != nil {
				return err
			}
			*side.runs = append(*side.runs, e)
		}
		// The next round runs the sides in the reverse order: the run slows
		// as the ledger grows, and a side that always ran first would be
		// favoured by that drift; over each two rounds, every side's mean
		// position is the same.
		slices.Reverse(sides)
	}
	if err := restart("", "OTEL_EXPORTER_OTLP_ENDPOINT="); err != nil {
		return err
	}
	t.Rounds, t.SampleRatio = tracingRounds, TracingSampleRatio
	t.OffPerSecond, t.OffAPICPU, t.OffWorkerCPU = combine(off)
	t.SampledPerSecond, t.SampledAPICPU, t.SampledWorker = combine(samp)
	t.OnPerSecond, t.OnAPICPU, t.OnWorkerCPU = combine(on)
	t.Ratio = t.OnPerSecond / t.OffPerSecond
	t.SampledRatio = t.SampledPerSecond / t.OffPerSecond
	t.OffRatioToRaw, t.OffRatioToLimit = r.ratios(t.OffPerSecond)
	t.OnRatioToRaw, t.OnRatioToLimit = r.ratios(t.OnPerSecond)
	t.Exports, t.Bytes = sink.requests.Load(), sink.bytes.Load()
	r.logf("tracing: usage end to end %.0f req/s exporting every span (%.3f×), %.0f req/s sampling %g (%.3f×), %.0f req/s exporting none (%d rounds); %d exports, %d KiB; CPU per request: api %.3f → %.3f → %.3f ms, worker %.3f → %.3f → %.3f ms",
		t.OnPerSecond, t.Ratio, t.SampledPerSecond, t.SampleRatio, t.SampledRatio, t.OffPerSecond, t.Rounds, t.Exports, t.Bytes>>10,
		t.OffAPICPU, t.SampledAPICPU, t.OnAPICPU, t.OffWorkerCPU, t.SampledWorker, t.OnWorkerCPU)
	return nil
}

// warmedEndToEnd warms the api and the worker just started (exporting to
// endpoint, none when empty) up with a tenth of the requests, unmeasured,
// then runs the end-to-end phase as phase.
func (r *run) warmedEndToEnd(ctx context.Context, phase, endpoint string) (EndToEnd, error) {
	l := closedLoop(ctx, r.cfg.E2EInFlight, int64(max(r.cfg.Requests/10, 1)), 5*time.Minute, r.usage(phase+"-warm"))
	if l.OK == 0 {
		return EndToEnd{}, fmt.Errorf("bench: tracing: warm-up: no request succeeded: %s", l.FirstErr)
	}
	if err := r.settle(ctx, l.OK); err != nil {
		return EndToEnd{}, err
	}
	r.logf("tracing: %s (endpoint %q):", phase, endpoint)
	return r.endToEndAs(ctx, phase)
}

// combine is the rate of runs together (their requests over their
// seconds) and the api's and the worker's CPU per request over all of them.
func combine(runs []EndToEnd) (perSecond, apiCPU, workerCPU float64) {
	var requests int64
	var seconds float64
	for _, e := range runs {
		requests += e.Requests
		seconds += e.Seconds
		apiCPU += cpuOf(e, "api") * float64(e.Requests)
		workerCPU += cpuOf(e, "worker") * float64(e.Requests)
	}
	if requests == 0 || seconds == 0 {
		return 0, 0, 0
	}
	return float64(requests) / seconds, apiCPU / float64(requests), workerCPU / float64(requests)
}

func cpuOf(e EndToEnd, process string) float64 {
	for _, c := range e.CPU {
		if c.Process == process {
			return c.MsPerRequest
		}
	}
	return 0
}

// restartAPIAndWorker stops the api and the worker and starts them again
// with env after the fleet's; the bench's requests go to the new api.
func (f *fleet) restartAPIAndWorker(ctx context.Context, env ...string) error {
	if err := f.stopWorker(); err != nil {
		return err
	}
	if err := f.api.stop(time.Minute); err != nil {
		return err
	}
	api, err := startBinary(ctx, f.dir, filepath.Join(f.r.cfg.BinDir, "api"), "api", append(slices.Clip(f.env), env...))
	if err != nil {
		return err
	}
	f.api, f.url = api, "http://"+api.field("addr")
	f.r.url = f.url
	return f.startWorker(ctx, "all", env...)
}

// otlpSink answers OTLP/HTTP exports as a collector does, counting them.
type otlpSink struct {
	url             string
	srv             *http.Server
	requests, bytes atomic.Int64
}

func newOTLPSink() (*otlpSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: OTLP receiver: %w", err)
	}
	s := &otlpSink{url: "http://" + l.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		s.bytes.Add(n)
		// An empty ExportTraceServiceResponse: nothing rejected.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *otlpSink) close() { _ = s.srv.Close() }
