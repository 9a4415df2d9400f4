package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Check reports whether one dependency is usable.
type Check struct {
	Name string
	Fn   func(context.Context) error
}

// OpsServer serves a binary's operations endpoints: GET /healthz (200 while
// every check passes, else 503 naming the failures) and whatever the binary
// adds to Mux (e.g. /metrics).
type OpsServer struct {
	Mux  *http.ServeMux
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// NewOpsServer listens on addr ("" = do not serve).
func NewOpsServer(addr string, checks ...Check) (*OpsServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failed := map[string]string{}
		for _, c := range checks {
			if err := c.Fn(ctx); err != nil {
				failed[c.Name] = err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "unavailable", "failed": failed})
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	s := &OpsServer{Mux: mux, done: make(chan error, 1)}
	if addr == "" {
		return s, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("operations endpoint: %w", err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Profile serves Go's profiler under /debug/pprof/ (PPROF_ENABLED).
func (s *OpsServer) Profile() {
	s.Mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	s.Mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.Mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.Mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.Mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// Addr is the address served, or "".
func (s *OpsServer) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops serving.
func (s *OpsServer) Close(log *slog.Logger) {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("operations endpoint shutdown", "err", err)
	}
}
