package httpapi

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"gorm.io/gorm"
)

// Defaults of Config.
const (
	MaxBodyDefault   = 1 << 20
	JWTLeewayDefault = 30 * time.Second
)

// Config holds the platform's settings. Zero fields take the defaults.
type Config struct {
	MaxBodyBytes int64         // request body limit of a route that sets none
	JWTSecret    []byte        // HS256 key; required
	JWTLeeway    time.Duration // clock skew allowed on exp, nbf and iat
	Proxies      Proxies       // the proxies in front of the API, whose X-Forwarded-For entries it believes (clientip.go)
	// PublicMetrics serves /metrics on the API's own address too; cmd/api
	// serves it on the operations address.
	PublicMetrics bool

	BanCheckInterval time.Duration // how often WatchBans compares Redis's ban list with MySQL's

	AvatarMaxBytes    int64 // largest avatar upload
	WallpaperMaxBytes int64 // largest wallpaper upload

	CodePepper []byte // the key of the email codes' HMAC; default one derived from JWTSecret

	ScoreSubmitPerMinute int // score submissions per user and game in a minute (mg:score:submit:rate)

	UsageBatchMax int // most usages a POST /v1/agent/usage/batch takes; 0 = UsageBatchMaxDefault
}

// Backends are the services the platform and its endpoints use. cmd/api builds
// them; the server constructs no domain service of its own.
type Backends struct {
	DB        *gorm.DB
	Redis     *store.Redis
	Publisher *messaging.Publisher      // nil: every publish is a 503
	Billing   Billing                   // the agent endpoints' pricing and deduction
	Topology  *topology.Topology        // the domains messages written to the outbox go to
	Objects   objstore.Store            // the source store uploads go to; nil: uploads are a 503
	Alipay    *paynotify.AlipayVerifier // nil: Alipay callbacks are refused
	Wechat    *paynotify.WechatVerifier // nil: WeChat Pay callbacks are refused
	Admin     http.Handler              // the operator console, served under /admin/ (admin.go); nil: not served
	Log       *slog.Logger
	Registry  *prometheus.Registry
	Now       func() time.Time // default time.Now
}

// HandlerFunc handles a request; a returned error is answered with the
// error model (see Error, ErrUnavailable).
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route is one endpoint.
type Route struct {
	Method  string
	Path    string  // chi pattern, e.g. /v1/games/{gameId}/scores
	Roles   []Role  // who may call it; none = anyone, without a token
	Limits  []Limit // checked in order after authentication
	Replay  bool    // require X-Timestamp and a fresh X-Nonce
	MaxBody int64   // request body limit; 0 = Config.MaxBodyBytes
	// Cookie also takes the bearer token from this cookie, and answers a
	// browser that authentication refuses with the login form (admin.go).
	Cookie string
	Handle HandlerFunc
}

// Server serves the routes with the platform around them.
type Server struct {
	cfg      Config
	backends Backends
	router   chi.Router
	served   []Route
	metrics  *httpMetrics
	auth     *authenticator
	bans     *banWatch
	accounts *accountIDs // user_account.id by username, for the game endpoints
}

// New returns a Server serving every route of the table in routes.go.
func New(cfg Config, backends Backends) (*Server, error) {
	if len(cfg.JWTSecret) == 0 {
		return nil, errors.New("httpapi: a JWT secret is required")
	}
	if backends.DB == nil || backends.Redis == nil || backends.Billing == nil || backends.Log == nil || backends.Registry == nil {
		return nil, errors.New("httpapi: DB, Redis, Billing, Log and Registry are required")
	}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, MaxBodyDefault)
	cfg.JWTLeeway = cmp.Or(cfg.JWTLeeway, JWTLeewayDefault)
	cfg.BanCheckInterval = cmp.Or(cfg.BanCheckInterval, BanCheckIntervalDefault)
	cfg.AvatarMaxBytes = cmp.Or(cfg.AvatarMaxBytes, AvatarMaxBytesDefault)
	cfg.WallpaperMaxBytes = cmp.Or(cfg.WallpaperMaxBytes, WallpaperMaxBytesDefault)
	cfg.ScoreSubmitPerMinute = cmp.Or(cfg.ScoreSubmitPerMinute, ScoreSubmitPerMinuteDefault)
	if len(cfg.CodePepper) == 0 {
		cfg.CodePepper = derivePepper(cfg.JWTSecret)
	}
	if backends.Now == nil {
		backends.Now = time.Now
	}
	s := &Server{cfg: cfg, backends: backends, router: chi.NewRouter(), metrics: newHTTPMetrics(backends.Registry), accounts: newAccountIDs()}
	s.auth = newAuthenticator(cfg.JWTSecret, cfg.JWTLeeway, backends.Now)
	s.bans = newBanWatch(backends.DB, backends.Redis, backends.Log, backends.Registry)
	// A span per request (doc/tracing.md): it continues the caller's
	// traceparent when the caller is trusted with Isle's traces (edge), and
	// otherwise starts a trace of its own linked to the caller's. Then
	// correlate: a panic's line carries the request id. The tracer is made
	// once here, not looked up for every request; observe names the span
	// after the route it finds.
	traced := otelhttp.NewMiddleware("http request", otelhttp.WithTracerProvider(otel.GetTracerProvider()),
		otelhttp.WithSpanNameFormatter(func(operation string, _ *http.Request) string { return operation }),
		otelhttp.WithPublicEndpointFn(publicCaller))
	s.router.Use(s.edge, traced, s.correlate, nosniff, s.recoverer, s.observe)
	s.router.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, Errorf(http.StatusNotFound, CodeNotFound, "no route %s", r.URL.Path))
	})
	s.router.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, Errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	for _, rt := range s.routes() {
		if err := checkLimits(rt); err != nil {
			return nil, err
		}
		s.Handle(rt)
	}
	return s, nil
}

// Handle registers a route. The API's endpoints are the table in routes.go;
// Handle serves one beyond it, for tests that need an endpoint of their own.
func (s *Server) Handle(rt Route) {
	s.served = append(s.served, rt)
	s.router.Method(rt.Method, rt.Path, s.chain(rt))
}

// Routes lists the routes registered, in order.
func (s *Server) Routes() []Route { return append([]Route(nil), s.served...) }

// Router is the chi router, for route walking in tests.
func (s *Server) Router() chi.Routes { return s.router }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// chain wraps a route's handler in authentication, the ban check, limits
// and replay protection, in that order, and gives back what a refused
// request counted against limits that count only accepted requests.
func (s *Server) chain(rt Route) http.Handler {
	limit := cmp.Or(rt.MaxBody, s.cfg.MaxBodyBytes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			s.fail(w, r, &http.MaxBytesError{Limit: limit})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if len(rt.Roles) > 0 {
			if rt.Cookie != "" {
				tokenFromCookie(r, rt.Cookie)
			}
			p, err := s.authenticate(r, rt.Roles)
			if err != nil {
				if rt.Cookie == "" || !browserDenied(w, r, err) {
					s.fail(w, r, err)
				}
				return
			}
			notePrincipal(r.Context(), p)
			r = r.WithContext(withPrincipal(r.Context(), p))
		}
		// The counts of limits that count only accepted requests: given
		// back before a refusal is answered, so that the client's next
		// request meets them (and by the deferred call when the handler
		// panics, before the recoverer answers).
		var counts []*counted
		defer func() { s.giveBack(r, counts) }()
		refuse := func(err error) {
			s.giveBack(r, counts)
			counts = nil
			s.fail(w, r, err)
		}
		for _, l := range rt.Limits {
			took, err := s.count(r, l)
			if took != nil && l.OnlyAccepted {
				counts = append(counts, took)
			}
			if err != nil {
				refuse(err)
				return
			}
		}
		if rt.Replay {
			if err := s.checkReplay(r); err != nil {
				refuse(err)
				return
			}
		}
		if err := rt.Handle(w, r); err != nil {
			refuse(err)
			return
		}
		counts = nil // accepted: its counts stand
	})
}

// fail answers with the error model and logs server-side failures.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if status := writeError(w, err); status >= 500 {
		s.backends.Log.ErrorContext(r.Context(), "request failed", "status", status, "err", err)
	}
}

func (s *Server) now() time.Time { return s.backends.Now() }

// derivePepper is the email codes' HMAC key when none is configured: one
// derived from the token key, so each deployment has its own without more
// setup, and neither key can be computed from the other's use.
func derivePepper(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("isle email code pepper v1"))
	return m.Sum(nil)
}
