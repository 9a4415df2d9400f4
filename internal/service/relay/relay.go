package relay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/testsignal"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Defaults of Config.
const (
	BatchSizeDefault   = 100
	IntervalDefault    = 100 * time.Millisecond // the Spring backend's 3 s left rows waiting up to 3 s (doc/outbox.md)
	LeaseDefault       = 30 * time.Second
	BackoffBaseDefault = time.Second
	BackoffMaxDefault  = 5 * time.Minute
)

// Config configures a Relay. Zero fields take the defaults.
type Config struct {
	// Owner names this relay in claimed_by (a nonce per claim follows it)
	// and in outbox_relay: unique among the relays of a database (a second
	// relay of a running owner's name claims, but cannot say it is alive);
	// default host name, process id and a random suffix. A '/' becomes '-'.
	Owner     string
	BatchSize int           // rows claimed per table and batch
	Interval  time.Duration // wait after a batch that was not full
	// Lease is how long a claimed row stays claimed: longer than a batch's
	// publishes and marks. A relay that dies leaves its rows for this long.
	Lease       time.Duration
	BackoffBase time.Duration // wait after a row's first failed publish; doubled at each further attempt
	BackoffMax  time.Duration // cap of the backoff
	Concurrency int           // publishes in flight per batch; default BatchSize
	Tables      []string      // the tables drained, of store.OutboxTables; default all of them
}

// Sender publishes one message and waits for the broker's confirm
// (*messaging.Publisher).
type Sender interface {
	Send(ctx context.Context, out messaging.Outgoing) error
}

// Relay drains the outbox tables. It is safe to run several, in one process
// or many.
type Relay struct {
	db     *gorm.DB // for the relay's presence
	out    *store.Outbox
	pub    Sender
	cfg    Config
	tables []table
	nonce  atomic.Uint64
	m      *Metrics
	log    *slog.Logger

	polled testsignal.Signal[poll] // a table was polled: for tests, off otherwise
}

// poll is what one batch of a running relay found, and how long it waits
// before the next (0: it goes on at once).
type poll struct {
	Table   string
	Claimed int
	Wait    time.Duration
}

// New returns a relay of every table in store.OutboxTables. tp resolves an
// outbox row's domain to its routing key and the object replication domain.
func New(db *gorm.DB, tp *topology.Topology, pub Sender, cfg Config, m *Metrics, log *slog.Logger) (*Relay, error) {
	if db == nil || tp == nil || pub == nil || log == nil {
		return nil, fmt.Errorf("relay: nil dependency")
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, BackoffBaseDefault)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, BackoffMaxDefault)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, cfg.BatchSize)
	if cfg.Owner == "" {
		cfg.Owner = defaultOwner()
	}
	cfg.Owner = strings.ReplaceAll(cfg.Owner, "/", "-") // the claim's separator
	if len(cfg.Owner) > 100 {
		cfg.Owner = cfg.Owner[:100] // claimed_by is VARCHAR(128), with the nonce
	}
	if len(cfg.Tables) == 0 {
		cfg.Tables = store.OutboxTables
	}
	r := &Relay{db: db, out: store.NewOutbox(db), pub: pub, cfg: cfg, m: m, log: log}
	for _, name := range cfg.Tables {
		t, err := newTable(name, tp)
		if err != nil {
			return nil, err
		}
		r.tables = append(r.tables, t)
	}
	return r, nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "relay"), os.Getpid(), hex.EncodeToString(b))
}

// Tables are the tables this relay drains.
func (r *Relay) Tables() []string { return append([]string(nil), r.cfg.Tables...) }

// Owner is the name this relay claims rows under.
func (r *Relay) Owner() string { return r.cfg.Owner }

// TableResult is what one batch of one table did.
type TableResult struct {
	Claimed   int // rows claimed
	Published int // confirmed by the broker and marked published
	Failed    int // publish failed: left with last_error and a backoff
	Parked    int // cannot be published as it is: parked with last_error until replayed
	Fenced    int // the claim had passed to another relay (its lease ran out): not marked by this one
}

// Result is what one RunOnce did, by table.
type Result map[string]TableResult

func (r Result) String() string {
	var b strings.Builder
	for _, name := range store.OutboxTables {
		t := r[name]
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: claimed %d, published %d, failed %d, parked %d, fenced %d", name, t.Claimed, t.Published, t.Failed, t.Parked, t.Fenced)
	}
	return b.String()
}

// RunOnce claims and publishes one batch of each table, one table after
// the other.
func (r *Relay) RunOnce(ctx context.Context) (Result, error) {
	res := make(Result, len(r.tables))
	for i := range r.tables {
		tr, err := r.batch(ctx, &r.tables[i])
		res[r.tables[i].name] = tr
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// activePoll is how soon a table is polled again after a batch that found
// rows but was not full: rows are coming in, and the next ones should not
// wait a whole Interval. Each empty poll after that doubles the wait, up to
// Interval, so an idle table is polled every Interval.
const activePoll = 50 * time.Millisecond

// backlogPeriod is the shortest period of the backlog-age gauge's query,
// which reads every pending row's created_at: polling at 100 ms, it need
// not run as often as the claim.
const backlogPeriod = 5 * time.Second

// Run drains every table until ctx is done, each in a loop of its own: a
// batch that came back full is followed at once by the next, one that found
// rows after activePoll, and empty polls after a wait that doubles from
// activePoll up to Interval. A batch claimed when ctx ends is still published and
// marked (within the lease), so a stop leaves no row claimed for nothing.
//
// Meanwhile it says that it is alive (a MySQL named lock, and a row of
// outbox_relay) and, every rescuePeriod, puts back the rows claimed by
// relays that are gone, so that their batches wait neither for their lease
// nor for their restart (doc/outbox.md, "A relay that dies").
func (r *Relay) Run(ctx context.Context) {
	p := store.NewRelayPresence(r.db, r.cfg.Owner)
	presenceDone := make(chan struct{})
	go func() {
		defer close(presenceDone)
		r.watch(ctx, p)
	}()
	var wg sync.WaitGroup
	for i := range r.tables {
		wg.Add(1)
		go func(t *table) {
			defer wg.Done()
			r.loop(ctx, t)
		}(&r.tables[i])
	}
	wg.Wait()
	<-presenceDone
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	p.Leave(lctx)
}

// rescuePeriod is how often a running relay checks that it holds its
// presence lock and looks for relays that are gone.
const rescuePeriod = time.Second

// watch keeps p held and rescues the rows of relays that are gone, every
// rescuePeriod until ctx ends.
func (r *Relay) watch(ctx context.Context, p *store.RelayPresence) {
	t := time.NewTicker(rescuePeriod)
	defer t.Stop()
	held := false
	for {
		switch err := p.Hold(ctx); {
		case err == nil && !held:
			held = true
			r.log.DebugContext(ctx, "relay listed as alive", "owner", r.cfg.Owner)
		case err != nil && ctx.Err() == nil:
			if held || errors.Is(err, store.ErrRelayOwnerLive) {
				r.log.WarnContext(ctx, "relay cannot say it is alive; its claims wait for their lease if it dies", "owner", r.cfg.Owner, "err", err)
			}
			held = false
		}
		if ctx.Err() == nil {
			put, gone, err := r.out.Rescue(ctx, r.cfg.Owner, r.cfg.Tables)
			for table, n := range put {
				r.m.rescued(table, n)
			}
			if len(gone) > 0 {
				r.log.WarnContext(ctx, "outbox rows put back: the relay that claimed them is gone", "relays", gone, "rows", put)
			}
			if err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "outbox rescue", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Relay) loop(ctx context.Context, t *table) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	var measured time.Time
	wait := r.cfg.Interval
	for ctx.Err() == nil {
		res, err := r.batch(ctx, t)
		if err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "outbox batch failed", "table", t.name, "err", err)
		}
		if res.Claimed > 0 {
			r.log.DebugContext(ctx, "outbox batch", "table", t.name, "claimed", res.Claimed,
				"published", res.Published, "failed", res.Failed, "parked", res.Parked, "fenced", res.Fenced)
		}
		if time.Since(measured) >= max(r.cfg.Interval, backlogPeriod) {
			measured = time.Now()
			if b, err := r.out.Backlog(ctx, t.name); err == nil {
				r.m.backlog(t.name, b)
			} else if ctx.Err() == nil {
				r.log.WarnContext(ctx, "outbox backlog age", "table", t.name, "err", err)
			}
		}
		switch {
		case err != nil:
			wait = r.cfg.Interval
		case res.Claimed == r.cfg.BatchSize:
			r.polled.Send(poll{Table: t.name, Claimed: res.Claimed})
			continue
		case res.Claimed > 0:
			wait = min(activePoll, r.cfg.Interval)
		default:
			wait = min(max(2*wait, activePoll), r.cfg.Interval)
		}
		r.polled.Send(poll{Table: t.name, Claimed: res.Claimed, Wait: wait})
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}
