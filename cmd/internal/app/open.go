package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keyclean"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"gorm.io/gorm"
)

// OpenMySQL opens the database, waits for it to answer, and refuses a schema
// older than this binary needs (the error says how to migrate).
func OpenMySQL(ctx context.Context, log *slog.Logger, cfg store.MySQLConfig) (*gorm.DB, error) {
	db, err := store.OpenMySQL(cfg)
	if err != nil {
		return nil, err
	}
	if err := retry(ctx, log, "MySQL", func(ctx context.Context) error { return store.PingMySQL(ctx, db) }); err != nil {
		_ = store.CloseMySQL(db)
		return nil, err
	}
	if err := store.CheckSchema(ctx, db); err != nil {
		_ = store.CloseMySQL(db)
		return nil, err
	}
	return db, nil
}

// OpenRedis opens the clients (go-redis's own log lines go to log), waits
// for Redis to answer and, when
// configured, deletes the volatile keys (doc/keys.md: caches are deleted at start-up).
func OpenRedis(ctx context.Context, log *slog.Logger, cfg config.Redis) (*store.Redis, error) {
	store.LogRedisTo(log)
	r, err := store.OpenRedis(cfg.RedisConfig)
	if err != nil {
		return nil, err
	}
	if err := retry(ctx, log, "Redis", r.Ping); err != nil {
		_ = r.Close()
		return nil, err
	}
	if cfg.CleanupOnStart {
		res, err := keyclean.Volatile(ctx, r, cfg.CleanupPatterns)
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		var deleted int64
		for _, n := range res {
			deleted += n
		}
		log.InfoContext(ctx, "volatile Redis keys deleted", "keys", deleted, "patterns", len(res))
	}
	return r, nil
}

// DialAMQP connects to RabbitMQ, to the first of its addresses
// (RABBITMQ_ADDRS) that answers, waiting for one to come up. name shows in
// the broker's connection list.
func DialAMQP(ctx context.Context, log *slog.Logger, cfg config.AMQP, name string) (*amqp.Connection, error) {
	var conn *amqp.Connection
	err := retry(ctx, log, "RabbitMQ", func(context.Context) error {
		c, _, err := messaging.DialFirst(cfg.URLs, 0, amqp.Config{
			Heartbeat:  10 * time.Second,
			Dial:       amqp.DefaultDial(10 * time.Second),
			Properties: amqp.Table{"connection_name": name},
		})
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	return conn, err
}

// Topology resolves the wire contract and, with declare, declares it on
// the broker, so no message can be published before its queue exists;
// without, it makes sure it exists (topology.Ensure), declaring only what
// is missing, which a user without the configure permission cannot.
func Topology(ctx context.Context, log *slog.Logger, conn *amqp.Connection, cfg config.AMQP, declare bool) (*topology.Topology, error) {
	tp, err := topology.New(cfg.Topology)
	if err != nil {
		return nil, err
	}
	if !declare {
		if err := tp.Ensure(conn); err != nil {
			return nil, fmt.Errorf("the topology is incomplete, and this binary may not declare it (the api and `islectl topology apply` do): %w", err)
		}
		log.InfoContext(ctx, "topology present", "prefix", tp.Prefix(), "exchanges", len(tp.Exchanges()), "queues", len(tp.Queues()))
		return tp, nil
	}
	if err := tp.Declare(conn); err != nil {
		return nil, fmt.Errorf("declare topology (run `islectl topology verify` to see every difference): %w", err)
	}
	log.InfoContext(ctx, "topology declared", "prefix", tp.Prefix(), "exchanges", len(tp.Exchanges()), "queues", len(tp.Queues()))
	return tp, nil
}
