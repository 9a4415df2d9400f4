package httpapi

import (
	"context"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Correlation id headers: the first one set on the request wins; the
// answer always carries X-Request-Id.
var correlationHeaders = []string{"X-Request-Id", "X-Correlation-Id"}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:/+=-]{1,128}$`)

// correlate takes the correlation id from the request, or makes one, and
// puts it in the request's context (correlation.WithRequestID): the logger
// adds it to every line logged with that context, and Publish sends it as
// the trace id of every message the request causes.
func (s *Server) correlate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id string
		for _, h := range correlationHeaders {
			if v := r.Header.Get(h); requestIDPattern.MatchString(v) {
				id = v
				break
			}
		}
		if id == "" {
			id = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(correlation.WithRequestID(r.Context(), id)))
	})
}

// nosniff tells browsers that every answer is of the type it says
// (objects, JSON, the console's pages): none is ever read as another,
// such as an upload as a page.
func nosniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a 500, logged with its stack.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.backends.Log.ErrorContext(r.Context(), "handler panicked", "panic", v, "stack", string(debug.Stack()))
				writeError(w, Errorf(http.StatusInternalServerError, CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusWriter records what a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// principalSlot carries the caller from chain back out to observe. chain
// authenticates inside the router and hands the principal down in a new
// request context, which observe, logging after the handler returned, never
// sees; the slot is shared through the context observe passes in.
type principalSlot struct {
	p   Principal
	set bool
}

type principalSlotKey struct{}

// withPrincipalSlot returns ctx with an empty slot, and the slot.
func withPrincipalSlot(ctx context.Context) (context.Context, *principalSlot) {
	slot := &principalSlot{}
	return context.WithValue(ctx, principalSlotKey{}, slot), slot
}

// notePrincipal fills the slot observe put in ctx, if any, so the request
// log names the caller.
func notePrincipal(ctx context.Context, p Principal) {
	if slot, ok := ctx.Value(principalSlotKey{}).(*principalSlot); ok {
		slot.p, slot.set = p, true
	}
}

// observe logs every request and counts it per route and status.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		ctx, caller := withPrincipalSlot(r.Context())
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		took := time.Since(began)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route), attribute.String("isle.request_id", correlation.RequestID(r.Context())))
		}
		s.metrics.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
		s.metrics.seconds.WithLabelValues(route, r.Method).Observe(took.Seconds())
		attrs := []any{"method", r.Method, "route", route, "path", r.URL.Path,
			"status", status, "bytes", sw.bytes, "ms", float64(took.Microseconds()) / 1000, "ip", s.clientIP(r)}
		if caller.set {
			attrs = append(attrs, "sub", caller.p.Subject, "role", caller.p.Role)
		}
		s.backends.Log.InfoContext(r.Context(), "http request", attrs...)
	})
}

type httpMetrics struct {
	requests     *prometheus.CounterVec
	seconds      *prometheus.HistogramVec
	banFailOpen  prometheus.Counter
	limited      *prometheus.CounterVec
	limitFailOps prometheus.Counter
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "isle_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
		}, []string{"route", "method"}),
		banFailOpen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_ban_check_fail_open_total", Help: "Requests let through because the ban check could not reach Redis.",
		}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "isle_rate_limited_total", Help: "Requests refused with 429, by limit.",
		}, []string{"limit"}),
		limitFailOps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_rate_limit_fail_open_total", Help: "Requests let through because a rate limit could not reach Redis.",
		}),
	}
	reg.MustRegister(m.requests, m.seconds, m.banFailOpen, m.limited, m.limitFailOps)
	return m
}
