package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
)

// fleet is the bench's own api, worker and outbox relay, on a database,
// key prefix and name prefix of their own.
type fleet struct {
	r      *run
	dir    string
	env    []string
	dsn    string
	redis  *store.Redis
	api    *binary
	worker *binary
	relay  *binary
	url    string
}

// startFleet creates the fleet's database (anew), declares its topology,
// and starts api, worker and relay from the bench's BinDir.
func startFleet(ctx context.Context, r *run, dir string) (*fleet, error) {
	for _, b := range []string{"api", "worker", "relay"} {
		if _, err := os.Stat(filepath.Join(r.cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("bench: no %s binary in %s (build them: go build -o bin/ ./cmd/...; or -bin DIR): %w", b, r.cfg.BinDir, err)
		}
	}
	c, err := store.NormalizeDSN(r.cfg.MySQL.DSN)
	if err != nil {
		return nil, err
	}
	c.DBName = FleetDatabaseDefault
	f := &fleet{r: r, dir: dir, dsn: c.FormatDSN()}
	r.logf("own fleet: database %s, key prefix %s:, names %s.*; logs in %s", FleetDatabaseDefault, FleetPrefixDefault, FleetPrefixDefault, dir)
	if err := store.DropDatabase(ctx, f.dsn); err != nil {
		return nil, err
	}
	if err := store.CreateDatabase(ctx, f.dsn); err != nil {
		return nil, err
	}
	mc := r.cfg.MySQL
	mc.DSN = f.dsn
	if r.db, err = store.OpenMySQL(mc); err != nil {
		return nil, err
	}
	if _, err := store.Migrate(ctx, r.db); err != nil {
		return f, err
	}
	tc := r.cfg.Topology
	tc.Prefix = FleetPrefixDefault
	if r.tp, err = topology.New(tc); err != nil {
		return f, err
	}
	if err := declare(r.cfg.AMQPURL, r.tp); err != nil {
		return f, fmt.Errorf("bench: declare the fleet's topology: %w", err)
	}
	rc := r.cfg.Redis
	rc.KeyPrefix = FleetPrefixDefault + ":"
	if f.redis, err = store.OpenRedis(rc); err != nil {
		return f, err
	}
	r.rdb = f.redis
	if err := wipeRedis(ctx, f.redis); err != nil {
		return f, err
	}
	var secret [32]byte
	_, _ = rand.Read(secret[:])
	r.cfg.JWTSecret = []byte(hex.EncodeToString(secret[:]))
	f.env = []string{
		"MYSQL_DSN=" + f.dsn,
		"REDIS_KEY_PREFIX=" + rc.KeyPrefix,
		"RABBITMQ_NAME_PREFIX=" + FleetPrefixDefault,
		"API_ADDR=127.0.0.1:0",
		"API_OPS_ADDR=127.0.0.1:0", // the default port would collide with a local fleet's
		"API_JWT_SECRET=" + string(r.cfg.JWTSecret),
		"WORKER_OPS_ADDR=127.0.0.1:0",
		"GAME_SCORE_SUBMIT_PER_MINUTE=" + strconv.Itoa(scoreSubmitLimit), // the Spring backend's 10 would measure 429s
		"AGENT_USAGE_BATCH_MAX=" + strconv.Itoa(max(r.cfg.BatchSize, BatchSizeDefault)),
		"RELAY_OPS_ADDR=127.0.0.1:0",
		"LOG_FORMAT=json",
		// The worker consumes through Isle's subscriber, whatever the
		// bench's own environment says (the consumer phase sets it, which
		// the worker takes only from a bench).
		"WORKER_SUBSCRIBER=",
		"ISLE_BENCH=1",
	}
	if r.cfg.Pprof {
		f.env = append(f.env, "PPROF_ENABLED=true")
	}
	if f.api, err = startBinary(ctx, dir, filepath.Join(r.cfg.BinDir, "api"), "api", f.env); err != nil {
		return f, err
	}
	f.url = "http://" + f.api.field("addr")
	if err := f.startWorker(ctx, "all"); err != nil {
		return f, err
	}
	if err := f.startRelay(ctx, 0); err != nil {
		return f, err
	}
	r.logf("own fleet up: api at %s (pid %d), worker pid %d, relay pid %d (interval %s)", f.url, f.api.pid(), f.worker.pid(), f.relay.pid(), f.relayInterval())
	if r.cfg.Pprof {
		r.logf("profiles: http://%s/debug/pprof/ (api), http://%s/debug/pprof/ (worker), http://%s/debug/pprof/ (relay)",
			f.api.field("ops"), f.worker.field("ops"), f.relay.field("ops"))
	}
	return f, nil
}

// The relay's variables the bench sets: an empty value is the relay's
// default, whatever the bench's own environment says.
const (
	relayIntervalVar = "OBJECT_REPLICATION_OUTBOX_RELAY_INTERVAL_MS"
	relayBatchVar    = "OBJECT_REPLICATION_OUTBOX_RELAY_BATCH_SIZE"
	relayEnabledVar  = "OBJECT_REPLICATION_OUTBOX_RELAY_ENABLED"
)

// startRelay starts the outbox relay with its default batch size and, when
// interval is 0, its default interval (what an operator gets); else with
// that interval.
func (f *fleet) startRelay(ctx context.Context, interval time.Duration) error {
	env := append(slices.Clip(f.env), relayBatchVar+"=", relayEnabledVar+"=", relayIntervalVar+"=")
	if interval > 0 {
		env = append(env, relayIntervalVar+"="+strconv.FormatInt(interval.Milliseconds(), 10))
	}
	b, err := startBinary(ctx, f.dir, filepath.Join(f.r.cfg.BinDir, "relay"), "relay", env)
	if err != nil {
		return err
	}
	f.relay = b
	if f.r.cfg.Pprof && interval > 0 {
		f.r.logf("relay restarted: profiles at http://%s/debug/pprof/", b.field("ops"))
	}
	return nil
}

// relayInterval is the poll interval the running relay said it started
// with; 0 if none runs or it did not say.
func (f *fleet) relayInterval() time.Duration {
	if f.relay == nil {
		return 0
	}
	d, _ := time.ParseDuration(f.relay.field("interval"))
	return d
}

// stopRelay stops the relay; it publishes and marks the batches it holds first.
func (f *fleet) stopRelay() error {
	if f.relay == nil {
		return nil
	}
	err := f.relay.stop(time.Minute)
	f.relay = nil
	return err
}

// startWorker starts the worker with -handlers handlers, and env after the
// fleet's.
func (f *fleet) startWorker(ctx context.Context, handlers string, env ...string) error {
	w, err := startBinary(ctx, f.dir, filepath.Join(f.r.cfg.BinDir, "worker"), "worker", append(slices.Clip(f.env), env...), "-handlers", handlers)
	if err != nil {
		return err
	}
	f.worker = w
	if f.r.cfg.Pprof && handlers != "all" {
		f.r.logf("worker restarted: profiles at http://%s/debug/pprof/", w.field("ops"))
	}
	return nil
}

// stopWorker stops the worker; its deliveries in flight go back to their queues.
func (f *fleet) stopWorker() error {
	if f.worker == nil {
		return nil
	}
	err := f.worker.stop(time.Minute)
	f.worker = nil
	return err
}

func (f *fleet) processes() []process {
	var out []process
	if f.api != nil {
		out = append(out, process{Name: "api", PID: f.api.pid()})
	}
	if f.worker != nil {
		out = append(out, process{Name: "worker", PID: f.worker.pid()})
	}
	if f.relay != nil {
		out = append(out, process{Name: "relay", PID: f.relay.pid()})
	}
	return out
}

// remove stops the fleet and, unless keep, deletes its queues, exchanges,
// keys and database.
func (f *fleet) remove(keep bool) error {
	var errs []error
	if f.api != nil {
		errs = append(errs, f.api.stop(time.Minute))
	}
	errs = append(errs, f.stopWorker(), f.stopRelay())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if f.r.db != nil {
		errs = append(errs, store.CloseMySQL(f.r.db))
		f.r.db = nil
	}
	if keep {
		if f.redis != nil {
			errs = append(errs, f.redis.Close())
		}
		return errors.Join(errs...)
	}
	if f.r.tp != nil {
		errs = append(errs, undeclare(f.r.cfg.AMQPURL, f.r.tp))
	}
	if f.redis != nil {
		errs = append(errs, wipeRedis(ctx, f.redis), f.redis.Close())
	}
	errs = append(errs, store.DropDatabase(ctx, f.dsn))
	return errors.Join(errs...)
}

func declare(url string, tp *topology.Topology) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	return tp.Declare(conn)
}

// undeclare deletes the topology's queues and exchanges.
func undeclare(url string, tp *topology.Topology) error {
	var queues []string
	for _, q := range tp.Queues() {
		queues = append(queues, q.Name)
	}
	err := deleteQueues(url, queues...)
	conn, cerr := amqp.Dial(url)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	defer conn.Close()
	for _, ex := range tp.Exchanges() {
		ch, cerr := conn.Channel()
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		if derr := ch.ExchangeDelete(ex, false, false); derr == nil {
			_ = ch.Close()
		}
	}
	return err
}

// queueDepth is the number of messages ready in a queue.
func queueDepth(conn *amqp.Connection, queue string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	return q.Messages, nil
}

// waitQueuesEmpty waits until the billing and usage queues hold nothing ready.
func (r *run) waitQueuesEmpty(ctx context.Context, timeout time.Duration) error {
	conn, err := amqp.Dial(r.cfg.AMQPURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	var queues []string
	for _, name := range []string{topology.DomainAgentBilling, topology.DomainAgentUsageStats} {
		if d, ok := r.tp.Domain(name); ok {
			queues = append(queues, d.Queue)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		busy := ""
		for _, q := range queues {
			n, err := queueDepth(conn, q)
			if err != nil {
				return fmt.Errorf("bench: depth of %s: %w", q, err)
			}
			if n > 0 {
				busy = fmt.Sprintf("%s holds %d", q, n)
			}
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s after %s", busy, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
