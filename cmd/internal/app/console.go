package app

import (
	"crypto/hmac"
	"crypto/sha256"
	"log/slog"
	"net/http"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// ConsoleDeps are the open services an operator console works with.
type ConsoleDeps struct {
	DB        *gorm.DB
	Redis     *store.Redis
	Topology  *topology.Topology
	Publisher *messaging.Publisher // nil: no replays, and no job that publishes
	Log       *slog.Logger
	Operator  func(r *http.Request) string
	CSRFKey   []byte // nil: a key of this process
}

// NewConsole builds the operator console a binary serves at prefix (the
// API's /admin, islectl console's root): the broker's management API for
// the queues, the fleet's health endpoints, and the reconciler's jobs built
// from the reconciler's own settings, run through a Runner that records
// each run as binary's.
func NewConsole(cfg config.Console, amqp config.AMQP, prefix, binary string, d ConsoleDeps) (*console.Console, error) {
	admin, err := rabbitadmin.New(amqp.ManagementURL, amqp.VHost)
	if err != nil {
		return nil, err
	}
	jobs, err := Jobs(JobDeps{DB: d.DB, Redis: d.Redis, Topology: d.Topology, Admin: admin, Publisher: d.Publisher, Log: d.Log}, cfg.Reconcile)
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
	deps := console.Deps{
		DB: d.DB, Redis: d.Redis, Topology: d.Topology, Broker: admin, Jobs: list, Probes: cfg.Probes, Log: d.Log,
		Runner:   reconcile.Runner{Redis: d.Redis, Runs: store.NewJobRuns(d.DB), Log: d.Log, Owner: ProcessName(binary)},
		Operator: d.Operator, CSRFKey: d.CSRFKey,
	}
	if d.Publisher != nil {
		deps.Publisher = d.Publisher
	}
	return console.New(console.Config{Prefix: prefix, SampleInterval: cfg.SampleInterval}, deps)
}

// ConsoleCSRFKey derives the key of the console's CSRF tokens from the
// token key, so that every API replica accepts the forms another served,
// and neither key can be computed from the other's use.
func ConsoleCSRFKey(jwtSecret []byte) []byte {
	m := hmac.New(sha256.New, jwtSecret)
	m.Write([]byte("isle console csrf v1"))
	return m.Sum(nil)
}
