package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// RedisTimeoutDefault bounds dialing, reads and writes when RedisConfig.Timeout is zero.
const RedisTimeoutDefault = 3 * time.Second

// RedisConfig selects the Redis server, the index of each logical database
// and the global key prefix. Zero fields take the defaults.
//
// With SentinelAddrs set, Addr is not used: the clients ask the Sentinels
// for the current master of SentinelMaster and follow it across failovers
// (doc/scaling.md).
type RedisConfig struct {
	Addr      string // host:port, default 127.0.0.1:6379
	Password  string
	Timeout   time.Duration
	Databases map[keys.DB]int // index by logical database; missing = the default
	KeyPrefix string

	SentinelAddrs    []string // host:port of each Sentinel; empty = one Redis at Addr
	SentinelMaster   string   // the master's name in the Sentinels; required with SentinelAddrs
	SentinelPassword string   // AUTH of the Sentinels themselves; empty for none
}

// ErrNoSentinelMaster refuses Sentinel addresses without the master's name.
var ErrNoSentinelMaster = errors.New("store: Redis Sentinel addresses need the master's name")

// Redis holds one client per distinct database index (doc/keys.md: 15 of them) and
// the key builder. Clients connect lazily; Close closes them all.
type Redis struct {
	clients map[keys.DB]*redis.Client
	// deductOnce is a client of the billing database that sends each
	// command once: go-redis's own retries would hide a first try whose
	// answer was lost behind a later try's refused dial, and the charge's
	// caller must see every try to know whether one may have run (it
	// retries itself: internal/service/billing).
	deductOnce *redis.Client
	keys       keys.Builder
}

// OpenRedis creates the clients. It does not connect; Ping does.
func OpenRedis(cfg RedisConfig) (*Redis, error) {
	kb, err := keys.NewBuilder(cfg.KeyPrefix)
	if err != nil {
		return nil, err
	}
	if len(cfg.SentinelAddrs) > 0 && cfg.SentinelMaster == "" {
		return nil, ErrNoSentinelMaster
	}
	byIndex := make(map[int]*redis.Client)
	r := &Redis{clients: make(map[keys.DB]*redis.Client), keys: kb}
	for _, db := range keys.DBs() {
		idx := db.IndexIn(cfg.Databases)
		c := byIndex[idx]
		if c == nil {
			c = newRedisClient(cfg, idx, 0)
			byIndex[idx] = c
		}
		r.clients[db] = c
	}
	r.deductOnce = newRedisClient(cfg, keys.DBAgentBilling.IndexIn(cfg.Databases), -1)
	return r, nil
}

// newRedisClient returns the client of database index idx: a plain client
// of cfg.Addr, or with Sentinels a failover client of the master they name.
// Both have the same timeouts and pool, and retry a command maxRetries
// times (0: go-redis's default of 3; -1: never).
func newRedisClient(cfg RedisConfig, idx, maxRetries int) *redis.Client {
	timeout := cmp.Or(cfg.Timeout, RedisTimeoutDefault)
	var c *redis.Client
	if len(cfg.SentinelAddrs) > 0 {
		c = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            cfg.SentinelMaster,
			SentinelAddrs:         cfg.SentinelAddrs,
			SentinelPassword:      cfg.SentinelPassword,
			Password:              cfg.Password,
			DB:                    idx,
			MaxRetries:            maxRetries,
			DialTimeout:           timeout,
			ReadTimeout:           timeout,
			WriteTimeout:          timeout,
			ContextTimeoutEnabled: true,
		})
	} else {
		c = redis.NewClient(&redis.Options{
			Addr:         cmp.Or(cfg.Addr, "127.0.0.1:6379"),
			Password:     cfg.Password,
			DB:           idx,
			MaxRetries:   maxRetries,
			DialTimeout:  timeout,
			ReadTimeout:  timeout,
			WriteTimeout: timeout,
			// Deadlines of callers' contexts bound commands too, so a
			// caller can ask a quick answer (the API's ban check) of a
			// Redis that does not answer.
			ContextTimeoutEnabled: true,
		})
	}
	c.AddHook(scriptSpans{})
	return c
}

// Client returns the client of a logical database.
func (r *Redis) Client(db keys.DB) *redis.Client { return r.clients[db] }

// Keys returns the key builder, with the configured prefix.
func (r *Redis) Keys() keys.Builder { return r.keys }

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error {
	if err := r.clients[keys.DBDefault].Ping(ctx).Err(); err != nil {
		return fmt.Errorf("store: redis ping: %w", err)
	}
	return nil
}

// Close closes every client.
func (r *Redis) Close() error {
	seen := make(map[*redis.Client]bool)
	errs := []error{r.deductOnce.Close()}
	for _, c := range r.clients {
		if !seen[c] {
			seen[c] = true
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// ErrMaybeRan marks an error after which Redis may or may not have run the
// command: the connection broke, or the answer did not come in time, after
// the command may have been sent. Running it again is safe only for an
// idempotent command, which then tells what happened.
var ErrMaybeRan = errors.New("store: Redis may have run the command; its answer was lost")

// maybeRan wraps err with ErrMaybeRan unless it says the command did not
// run: an answer from Redis (redis.Nil, an error reply), a connection that
// never opened (a dial error), the client's pool or its closing.
func maybeRan(err error) error {
	var reply redis.Error
	var op *net.OpError
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.As(err, &reply):
		return err
	case errors.As(err, &op) && op.Op == "dial":
		return err
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolExhausted):
		return err
	}
	return fmt.Errorf("%w: %w", ErrMaybeRan, err)
}
