package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
)

// ConsoleSite is where an operator console is served and who uses it.
type ConsoleSite struct {
	Prefix   string                       // the API's /admin, islectl console's root ("")
	Binary   string                       // the binary the runs of jobs it starts are recorded as
	Operator func(r *http.Request) string // who makes a request, for the log of actions
	CSRFKey  []byte                       // nil: a key of this process
}

// NewConsole builds the operator console a binary serves at site: the
// broker's management API for the queues, the fleet's health endpoints,
// and the reconciler's jobs built from b and the reconciler's own
// settings, run through a Runner that records each run as site.Binary's.
func NewConsole(cfg config.Console, amqp config.AMQP, site ConsoleSite, b Backends) (*console.Console, error) {
	if b.Admin == nil {
		admin, err := rabbitadmin.New(amqp.ManagementURL, amqp.VHost)
		if err != nil {
			return nil, err
		}
		b.Admin = admin
	}
	jobs, err := Jobs(b, cfg.Reconcile)
	if err != nil {
		return nil, err
	}
	specs := Schedules(cfg.Reconcile)
	var list []console.Job
	for _, name := range JobNames {
		if j, ok := jobs[name]; ok {
			list = append(list, console.Job{Job: j, Schedule: specs[name]})
		}
	}
	cb := console.Backends{
		DB: b.DB, Redis: b.Redis, Topology: b.Topology, Broker: b.Admin, Jobs: list, Probes: cfg.Probes, Log: b.Log,
		Runner:   reconcile.Runner{Redis: b.Redis, Runs: store.NewJobRuns(b.DB), Log: b.Log, Owner: ProcessName(site.Binary)},
		Operator: site.Operator, CSRFKey: site.CSRFKey,
	}
	if b.Publisher != nil { // a nil *Publisher in the interface would not read as nil
		cb.Publisher = b.Publisher
	}
	return console.New(console.Config{Prefix: site.Prefix, SampleInterval: cfg.SampleInterval}, cb)
}

// ConsoleCSRFKey derives the key of the console's CSRF tokens from the
// token key, so that every API replica accepts the forms another served,
// and neither key can be computed from the other's use.
func ConsoleCSRFKey(jwtSecret []byte) []byte {
	m := hmac.New(sha256.New, jwtSecret)
	m.Write([]byte("isle console csrf v1"))
	return m.Sum(nil)
}
