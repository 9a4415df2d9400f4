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

// Tracing is the cost of exporting traces: the end-to-end phase again with
// the api and the worker exporting every span over OTLP/HTTP (to a
// receiver in the bench that takes them and keeps nothing), against the
// end-to-end phase just run with no endpoint configured (doc/tracing.md).
type Tracing struct {
	Skipped      string  `json:"skipped,omitempty"`
	OffPerSecond float64 `json:"off_per_second"` // usage end to end, nothing exported
	OnPerSecond  float64 `json:"on_per_second"`  // the same, every span exported
	Ratio        float64 `json:"ratio"`          // on ÷ off
	Exports      int64   `json:"exports"`        // OTLP requests the receiver got
	Bytes        int64   `json:"bytes"`
	OffAPICPU    float64 `json:"off_api_cpu_ms"` // api CPU per request, ms
	OnAPICPU     float64 `json:"on_api_cpu_ms"`
	OffWorkerCPU float64 `json:"off_worker_cpu_ms"`
	OnWorkerCPU  float64 `json:"on_worker_cpu_ms"`
}

// tracing runs the end-to-end phase with the api and the worker exporting
// their spans, then starts them again as they were.
func (r *run) tracing(ctx context.Context) error {
	t := &r.report.Tracing
	off := r.report.EndToEnd
	switch {
	case r.fleet == nil:
		t.Skipped = "needs the bench's own fleet"
	case off.Requests == 0:
		t.Skipped = "needs the e2e phase in the same run"
	}
	if t.Skipped != "" {
		r.logf("tracing: skipped: %s", t.Skipped)
		return nil
	}
	sink, err := newOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	if err := r.fleet.restartAPIAndWorker(ctx, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.url); err != nil {
		return err
	}
	r.logf("tracing: api and worker export every span to %s", sink.url)
	err = r.endToEndAs(ctx, "e2e-traced")
	on := r.report.EndToEnd
	r.report.EndToEnd = off
	if err != nil {
		return err
	}
	if err := r.fleet.restartAPIAndWorker(ctx, "OTEL_EXPORTER_OTLP_ENDPOINT="); err != nil {
		return err
	}
	t.OffPerSecond, t.OnPerSecond = off.PerSecond, on.PerSecond
	t.Ratio = on.PerSecond / off.PerSecond
	t.Exports, t.Bytes = sink.requests.Load(), sink.bytes.Load()
	t.OffAPICPU, t.OffWorkerCPU = cpuOf(off, "api"), cpuOf(off, "worker")
	t.OnAPICPU, t.OnWorkerCPU = cpuOf(on, "api"), cpuOf(on, "worker")
	r.logf("tracing: usage end to end %.0f req/s exporting every span, %.0f req/s exporting none (%.3f×); %d exports, %d KiB; CPU per request: api %.3f → %.3f ms, worker %.3f → %.3f ms",
		t.OnPerSecond, t.OffPerSecond, t.Ratio, t.Exports, t.Bytes>>10, t.OffAPICPU, t.OnAPICPU, t.OffWorkerCPU, t.OnWorkerCPU)
	return nil
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
