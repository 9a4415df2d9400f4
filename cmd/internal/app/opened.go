package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"gorm.io/gorm"
)

// Needs says which services a binary uses; a nil section is not opened.
type Needs struct {
	Name  string // the binary, used as the AMQP connection name
	MySQL *store.MySQLConfig
	Redis *config.Redis
	AMQP  *config.AMQP
	// Declare: declare the topology at start (the api); otherwise only
	// make sure it exists (topology.Ensure), which the least RabbitMQ
	// permissions of the other binaries allow (doc/deploy.md).
	Declare bool
	// Payments are the gateways' keys, to verify the callbacks of paid
	// notifications without an amount with (the worker).
	Payments *config.Payments
}

// PaymentProofs verifies the gateway callback in a PaymentNotifyMessage's
// rawBody (config.Payments.Gateways builds one; handlers.PaymentProofs is
// what the notify consumer takes).
type PaymentProofs interface {
	VerifyRecord(channel, rawBody string) (topology.PaymentNotify, error)
}

// Opened is what Open opened for a binary. Fields it did not need are nil.
type Opened struct {
	DB       *gorm.DB
	Redis    *store.Redis
	AMQP     *amqp.Connection
	Topology *topology.Topology
	Payments PaymentProofs // the gateways' verifiers, those configured (Needs.Payments)
	closers  []func() error
}

// Open opens what n asks for, in order the gateways' verifiers (their keys
// parsed), MySQL (schema checked), Redis (volatile keys cleaned), RabbitMQ
// (topology declared, or ensured). On error it closes whatever it had
// opened.
func Open(ctx context.Context, log *slog.Logger, n Needs) (*Opened, error) {
	d := &Opened{}
	fail := func(err error) (*Opened, error) {
		_ = d.Close()
		return nil, err
	}
	if n.Payments != nil {
		g, err := n.Payments.Gateways()
		if err != nil {
			return fail(err)
		}
		d.Payments = g
	}
	if n.MySQL != nil {
		db, err := OpenMySQL(ctx, log, *n.MySQL)
		if err != nil {
			return fail(err)
		}
		d.DB = db
		d.closers = append(d.closers, func() error { return store.CloseMySQL(db) })
	}
	if n.Redis != nil {
		r, err := OpenRedis(ctx, log, *n.Redis)
		if err != nil {
			return fail(err)
		}
		d.Redis = r
		d.closers = append(d.closers, r.Close)
	}
	if n.AMQP != nil {
		conn, err := DialAMQP(ctx, log, *n.AMQP, "isle-"+n.Name)
		if err != nil {
			return fail(err)
		}
		d.AMQP = conn
		d.closers = append(d.closers, conn.Close)
		if d.Topology, err = Topology(ctx, log, conn, *n.AMQP, n.Declare); err != nil {
			return fail(err)
		}
	}
	return d, nil
}

// Checks are the /healthz checks of the opened services.
func (d *Opened) Checks() []Check {
	var cs []Check
	if d.DB != nil {
		cs = append(cs, Check{Name: "mysql", Fn: func(ctx context.Context) error { return store.PingMySQL(ctx, d.DB) }})
	}
	if d.Redis != nil {
		cs = append(cs, Check{Name: "redis", Fn: d.Redis.Ping})
	}
	if d.AMQP != nil {
		cs = append(cs, Check{Name: "rabbitmq", Fn: func(context.Context) error {
			if d.AMQP.IsClosed() {
				return errors.New("connection closed")
			}
			return nil
		}})
	}
	return cs
}

// Close closes everything in reverse order of opening.
func (d *Opened) Close() error {
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	d.closers = nil
	return errors.Join(errs...)
}
