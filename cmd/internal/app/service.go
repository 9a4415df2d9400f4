package app

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/tracing"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
)

// Binary is what is a service binary's own in the prelude Start runs for
// it (api, worker, relay, reconcile): its name, its flags, its
// configuration C and what it opens.
type Binary[C any] struct {
	Name string
	// Flags holds the binary's own flags, declared; nil: it takes none.
	Flags *flag.FlagSet
	// CheckFlags, when set, checks the flags' values once parsed, before
	// the configuration is read.
	CheckFlags func() error
	Load       func(lookupEnv func(string) (string, bool)) (C, error)
	Log        func(cfg *C) config.Log
	// Warn, when set, logs what the configuration deserves a warning for,
	// before anything is opened.
	Warn func(ctx context.Context, log *slog.Logger, cfg *C)
	// Needs are the services to open; Start fills in the Name.
	Needs func(cfg *C) Needs
}

// Service is a service binary once its prelude ran: its logger, the
// services it opened and its Prometheus registry, which holds the Go and
// process collectors.
type Service struct {
	Log      *slog.Logger
	Opened   *Opened
	Registry *prometheus.Registry
	pprof    bool
	traces   func(context.Context) error // flushes the spans and stops their exporter
}

// Start is a service binary's prelude: it parses args with b's flags, reads
// the configuration from lookupEnv (its errors under "configuration:"),
// makes the binary's logger on stderr, logs b's warnings, opens what b
// needs (Open) and makes the registry. Close the Service when done: it
// closes what was opened.
func Start[C any](ctx context.Context, args []string, lookupEnv func(string) (string, bool), b Binary[C]) (*Service, C, error) {
	var cfg C
	fs := b.Flags
	if fs == nil {
		fs = flag.NewFlagSet(b.Name, flag.ContinueOnError)
	}
	if err := fs.Parse(args); err != nil {
		return nil, cfg, err
	}
	if b.CheckFlags != nil {
		if err := b.CheckFlags(); err != nil {
			return nil, cfg, err
		}
	}
	cfg, err := b.Load(lookupEnv)
	if err != nil {
		return nil, cfg, fmt.Errorf("configuration:\n%w", err)
	}
	lc := b.Log(&cfg)
	log := NewLogger(os.Stderr, lc.Level, lc.Format, b.Name)
	if b.Warn != nil {
		b.Warn(ctx, log, &cfg)
	}
	traces, err := tracing.Setup(ctx, tracing.Config{Export: lc.Tracing.Export, Service: cmp.Or(lc.Tracing.Service, "isle-"+b.Name)})
	if err != nil {
		return nil, cfg, err
	}
	if lc.Tracing.Export {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
		log.Info("exporting traces over OTLP", "service", cmp.Or(lc.Tracing.Service, "isle-"+b.Name))
	}
	needs := b.Needs(&cfg)
	needs.Name = b.Name
	opened, err := Open(ctx, log, needs)
	if err != nil {
		return nil, cfg, errors.Join(err, traces(ctx))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Service{Log: log, Opened: opened, Registry: reg, pprof: lc.Pprof, traces: traces}, cfg, nil
}

// ServeOps serves the binary's operations endpoints on addr ("" = none,
// NewOpsServer): /healthz over the checks of the opened services and
// extra, GET /metrics from the registry, and, with PPROF_ENABLED, the
// profiler. The binary opens it once it is ready to work, and closes it
// first as it stops.
func (s *Service) ServeOps(addr string, extra ...Check) (*OpsServer, error) {
	ops, err := NewOpsServer(addr, append(s.Opened.Checks(), extra...)...)
	if err != nil {
		return nil, err
	}
	ops.Mux.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{Registry: s.Registry}))
	if s.pprof {
		ops.Profile()
	}
	return ops, nil
}

// Close closes the services Start opened, in reverse order, and flushes
// the spans not yet exported (for up to 5 s).
func (s *Service) Close() error {
	err := s.Opened.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(err, s.traces(ctx))
}
