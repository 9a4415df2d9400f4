// Package console is the operator console (doc/console.md): server-rendered
// HTML pages of the fleet's queues and health, its dead messages, the
// outbox rows the relay parked, a user's money and the reconciler's jobs,
// with the few actions an operator takes from them (replay dead messages
// or parked rows, run a job now). Pages are html/template
// files embedded in the binary, readable without JavaScript; every action
// is a POST form carrying a CSRF token, logged with the operator who took it.
//
// The console authenticates nobody: whoever mounts it does (the API serves
// it under /admin/ to the admin role; `islectl console` on loopback) and
// says who the operator is through Backends.Operator.
package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Defaults of Config.
const (
	SampleIntervalDefault = 5 * time.Second
	SampleWindowDefault   = 10 * time.Minute
)

// Config holds the console's settings; zero fields take the defaults.
type Config struct {
	Prefix         string        // the URL path it is mounted at, e.g. "/admin"; "" = the root
	SampleInterval time.Duration // how often the queues and the health are sampled
	SampleWindow   time.Duration // how far back the sparklines reach
}

// Broker is what the console reads of RabbitMQ's management API
// (rabbitadmin.Client).
type Broker interface {
	Queues(ctx context.Context) (map[string]rabbitadmin.QueueStats, error)
	Ping(ctx context.Context) error
}

// Publisher sends replayed dead messages (messaging.Publisher).
type Publisher interface {
	dlq.Republish
	Ping(ctx context.Context) error
}

// Probe is one binary's health endpoint, e.g. the worker's
// http://127.0.0.1:9090/healthz. An empty URL is a binary that serves none.
type Probe struct {
	Name string
	URL  string
}

// Backends are the services the console reads and acts on.
type Backends struct {
	DB        *gorm.DB
	Redis     *store.Redis
	Topology  *topology.Topology
	Broker    Broker
	Publisher Publisher // nil: replays are refused
	Jobs      []Job     // the reconciler's jobs, in the order shown
	Runner    JobRunner // runs a job now under its lock; nil: jobs are not run from the console
	Probes    []Probe
	Log       *slog.Logger
	// Operator names who makes a request, for the log of actions; nil
	// names everyone "local".
	Operator func(r *http.Request) string
	// CSRFKey signs the forms' tokens. Replicas behind one address need the
	// same key; nil is a random key of this process.
	CSRFKey []byte
	Now     func() time.Time // default time.Now
}

// Console serves the pages; Run samples the queues for them.
type Console struct {
	cfg      Config
	backends Backends
	dead     *dlq.Store
	mux      *http.ServeMux
	pages    pages
	samples  *sampler
}

// New returns the console. DB, Redis, Topology, Broker and Log are required.
func New(cfg Config, backends Backends) (*Console, error) {
	if backends.DB == nil || backends.Redis == nil || backends.Topology == nil || backends.Broker == nil || backends.Log == nil {
		return nil, errors.New("console: DB, Redis, Topology, Broker and Log are required")
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	cfg.SampleInterval = cmp.Or(cfg.SampleInterval, SampleIntervalDefault)
	cfg.SampleWindow = cmp.Or(cfg.SampleWindow, SampleWindowDefault)
	if backends.Now == nil {
		backends.Now = time.Now
	}
	if backends.Operator == nil {
		backends.Operator = func(*http.Request) string { return "local" }
	}
	if len(backends.CSRFKey) == 0 {
		backends.CSRFKey = make([]byte, 32)
		_, _ = rand.Read(backends.CSRFKey) // never fails (crypto/rand)
	}
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, backends: backends, dead: dlq.NewStore(backends.DB, backends.Topology), mux: http.NewServeMux(), pages: pg}
	c.samples = newSampler(c)
	c.routes()
	return c, nil
}

// Route is a page or an action of the console: its method and its path
// below Config.Prefix, where {name} is a segment that varies.
type Route struct {
	Method string
	Path   string
}

// Routes lists every page and action of the console. A router that mounts
// the console under a prefix routes each of them to it (the API's routes
// table does, and its OpenAPI document lists them); any other path under
// the prefix answers the console's 404 page.
func Routes() []Route {
	handlers := (&Console{}).handlers()
	out := make([]Route, len(handlers))
	for i, h := range handlers {
		out[i] = h.Route
	}
	return out
}

// handler is one route of the console and what serves it.
type handler struct {
	Route
	serve http.HandlerFunc
}

func (c *Console) handlers() []handler {
	get := func(path string, h func(w http.ResponseWriter, r *http.Request) (rendered, error)) handler {
		return handler{Route{http.MethodGet, path}, c.page(h)}
	}
	post := func(path string, h func(w http.ResponseWriter, r *http.Request) (rendered, error)) handler {
		return handler{Route{http.MethodPost, path}, c.action(h)}
	}
	return []handler{
		get("/", c.overview),
		get("/dead", c.deadList),
		get("/dead/{domain}/{id}", c.deadOne),
		post("/dead/replay", c.replay),
		get("/money", c.money),
		get("/outbox", c.outbox),
		post("/outbox/replay", c.replayOutbox),
		get("/jobs", c.jobs),
		post("/jobs/{name}/run", c.runJob),
		{Route{http.MethodGet, "/static/console.css"}, c.css},
	}
}

// routes registers every page and action under the prefix.
func (c *Console) routes() {
	p := c.cfg.Prefix
	for _, h := range c.handlers() {
		path := h.Path
		if path == "/" {
			path = "/{$}" // the overview is the prefix itself, not everything below it
		}
		c.mux.HandleFunc(h.Method+" "+p+path, h.serve)
	}
	c.mux.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, errorf(http.StatusNotFound, "no page %s", r.URL.Path))
	})
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// Run samples the queues and the health every SampleInterval until ctx
// ends; the overview draws its sparklines from the samples of the last
// SampleWindow. Without Run, the overview samples when it is asked.
func (c *Console) Run(ctx context.Context) {
	tick := time.NewTicker(c.cfg.SampleInterval)
	defer tick.Stop()
	for {
		c.samples.take(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// path is the console's URL of a page, e.g. path("/dead") = "/admin/dead".
func (c *Console) path(p string) string { return c.cfg.Prefix + p }

func (c *Console) now() time.Time { return c.backends.Now() }
