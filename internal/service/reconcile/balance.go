package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"gorm.io/gorm"
)

// Defaults of BalanceSyncConfig.
const (
	PendingAgeDefault   = 5 * time.Minute
	ConfirmDelayDefault = 10 * time.Second
	QuietDefault        = 2 * time.Minute
	BatchDefault        = 500
	lateAge             = time.Minute
	progressEvery       = 10 * time.Second
	debitChunk          = 100 // pending deductions per ledger transaction
)

// BalanceSyncConfig tunes the balance-sync job. Zero fields take the defaults.
type BalanceSyncConfig struct {
	PendingAge time.Duration // pending deductions older than this are applied here (their message is late or lost)
	Quiet      time.Duration // users with ledger entries newer than this are not compared
	Batch      int           // users per SCAN batch, pipeline and SQL statement
	// ConfirmDelay is how long a drift waits before its ADJUST, after which
	// the in-flight gate is asked and the user read again; negative: none.
	ConfirmDelay time.Duration
}

// BalanceSync is the balance-sync job (doc/money.md; every 30 minutes by default). It
// never copies a Redis balance into MySQL as the Spring backend's job did: it
//  1. applies pending deductions older than PendingAge through the ledger
//     (exactly once, whoever else applies them) and clears them;
//  2. settles ledger entries older than PendingAge whose Redis side a crash
//     or a Redis error left undone;
//  3. compares each quiet user's Redis and MySQL balances (no pending
//     deduction, no unsettled or recent ledger entry) and corrects a drift
//     with an ADJUST ledger row naming both values;
//  4. drops what Redis re-initialisations no longer need.
type BalanceSync struct {
	rdb      *store.Redis
	ledger   *store.Ledger
	balances *store.Balances
	usage    *store.UsageStats
	cfg      BalanceSyncConfig
	inflight InFlight
	metrics  *Metrics
	log      *slog.Logger
	now      func() time.Time
}

// NewBalanceSync returns the job. inflight is asked before each ADJUST.
func NewBalanceSync(db *gorm.DB, rdb *store.Redis, cfg BalanceSyncConfig, inflight InFlight, m *Metrics, log *slog.Logger) *BalanceSync {
	if inflight == nil {
		panic("reconcile: NewBalanceSync: nil InFlight") // a wiring bug stops start-up
	}
	cfg.PendingAge = cmp.Or(cfg.PendingAge, PendingAgeDefault)
	cfg.Quiet = cmp.Or(cfg.Quiet, QuietDefault)
	cfg.Batch = cmp.Or(cfg.Batch, BatchDefault)
	cfg.ConfirmDelay = cmp.Or(cfg.ConfirmDelay, ConfirmDelayDefault)
	return &BalanceSync{rdb: rdb, ledger: store.NewLedger(db), balances: store.NewBalances(db, rdb), usage: store.NewUsageStats(db, rdb), cfg: cfg, inflight: inflight, metrics: m, log: log, now: time.Now}
}

// Name is "balance-sync".
func (j *BalanceSync) Name() string { return "balance-sync" }

// BalanceResult is what one balance-sync run did.
type BalanceResult struct {
	UsersScanned   int // Redis balances compared or considered
	PendingApplied int // pending deductions this run wrote to the ledger
	PendingCleared int // pending deductions already in the ledger, cleared
	Refunded       int // second charges of a request id (taken after Redis forgot the first) given back
	UsageCounted   int // usage of pending deductions counted here (their usage message was never sent)
	Settled        int // ledger entries whose Redis side this run finished
	DriftFound     int // quiet users whose Redis and MySQL balances differed
	Adjustments    int // ADJUST ledger rows written
	Rebuilt        int // hot balances found behind or above MySQL, rebuilt from it
	Deferred       int // drifts not corrected: a deduction message may still move them (the three below)
	Busy           int // users skipped: pending deductions or recent ledger activity
	LateCleaned    int // leftovers of Redis re-initialisations removed
	Unreadable     int // users skipped because their Redis data cannot be read (each logged with the key's value)
	Errors         int

	DeferredDead     int // drifts deferred by a stored dead message of their user that may still apply
	DeferredInFlight int // drifts deferred while billing messages are queued or unacknowledged (of unknown users)
	DeferredUnknown  int // drifts deferred because the gate could not tell what may still arrive
	// Deferrals are the deferred drifts' users, and what held each back.
	Deferrals []Deferral
}

// Deferral is one user whose drift balance-sync left for a later run.
type Deferral struct {
	User     string
	Messages []string // the stored dead messages that may still move its money ("agent-billing/12")
	Why      string   // without Messages: why every drift waited
}

// deferralsShown bounds the users a result names (the counts stay whole).
const deferralsShown = 20

// deferredBy says which users were deferred and why:
// "xia by agent-billing/12; yan, zoe: agent-billing.deduct holds 3 messages ...".
func (r BalanceResult) deferredBy() string {
	var parts []string
	why := map[string][]string{} // users by the reason every drift waited
	var whys []string
	for i, d := range r.Deferrals {
		if i == deferralsShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(r.Deferrals)-i))
			break
		}
		if len(d.Messages) > 0 {
			parts = append(parts, d.User+" by "+strings.Join(d.Messages, ", "))
			continue
		}
		if _, ok := why[d.Why]; !ok {
			whys = append(whys, d.Why)
		}
		why[d.Why] = append(why[d.Why], d.User)
	}
	for _, w := range whys {
		parts = append(parts, strings.Join(why[w], ", ")+": "+w)
	}
	return strings.Join(parts, "; ")
}

// counter is one count of a result: its metric item name, its words in
// the printed result, and its value.
type counter struct {
	name, label string
	n           int
}

// items lists the counters in report order.
func (r BalanceResult) items() []counter {
	return []counter{
		{"users_scanned", "users scanned", r.UsersScanned}, {"pending_applied", "pending applied", r.PendingApplied},
		{"pending_cleared", "pending cleared", r.PendingCleared}, {"refunded", "refunded", r.Refunded}, {"usage_counted", "usage counted", r.UsageCounted}, {"settled", "settled", r.Settled},
		{"drift_found", "drift found", r.DriftFound}, {"adjustments", "adjustments", r.Adjustments}, {"rebuilt", "rebuilt", r.Rebuilt}, {"deferred", "deferred", r.Deferred},
		{"busy", "busy", r.Busy}, {"late_cleaned", "late cleaned", r.LateCleaned}, {"unreadable", "unreadable", r.Unreadable},
		{"errors", "errors", r.Errors},
	}
}

// deferrals lists the counts of deferred drifts by cause; the printed
// result gives them as deferredBy.
func (r BalanceResult) deferrals() []counter {
	return []counter{{"deferred_dead", "", r.DeferredDead}, {"deferred_in_flight", "", r.DeferredInFlight}, {"deferred_unknown", "", r.DeferredUnknown}}
}

// Count returns the count the logs name name ("users_scanned", ...), or 0.
func (r BalanceResult) Count(name string) int {
	for _, it := range append(r.items(), r.deferrals()...) {
		if it.name == name {
			return it.n
		}
	}
	return 0
}

// String lists the counts; deferred drifts are followed by their users and
// what held each back.
func (r BalanceResult) String() string {
	parts := make([]string, 0, 14)
	for _, it := range r.items() {
		p := fmt.Sprintf("%s %d", it.label, it.n)
		if it.name == "deferred" && len(r.Deferrals) > 0 {
			p += " (" + r.deferredBy() + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// LogValue implements slog.LogValuer: the counts, and deferred_by naming
// the deferred users when there are some.
func (r BalanceResult) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 18)
	for _, it := range append(r.items(), r.deferrals()...) {
		attrs = append(attrs, slog.Int(it.name, it.n))
	}
	if len(r.Deferrals) > 0 {
		attrs = append(attrs, slog.String("deferred_by", r.deferredBy()))
	}
	return slog.GroupValue(attrs...)
}

// RunOnce runs the four steps over every user with a Redis key.
func (j *BalanceSync) RunOnce(ctx context.Context) (Result, error) {
	var res BalanceResult
	err := errors.Join(j.applyPending(ctx, &res), j.settleLeftovers(ctx, &res), j.compare(ctx, &res), j.cleanLate(ctx, &res))
	for _, it := range append(res.items(), res.deferrals()...) {
		j.metrics.add(j.Name(), it.name, it.n)
	}
	return res, err
}

// unreadable reports a user whose Redis data cannot be read; the run goes
// on with the others. Each run reports it again until someone mends the key
// (deleting a malformed balance makes the next request initialise it from
// MySQL).
func (j *BalanceSync) unreadable(res *BalanceResult, user string, err error) {
	res.Unreadable++
	j.log.Error("user skipped: Redis data unreadable", "user", user, "err", err)
}

// cleanLate drops the late entries of balances still missing.
func (j *BalanceSync) cleanLate(ctx context.Context, res *BalanceResult) error {
	return j.rdb.ScanUsers(ctx, keys.AgentBalanceLate, j.cfg.Batch, func(users []string) error {
		n, bad, err := j.balances.CleanLate(ctx, users, lateAge, j.now())
		res.LateCleaned += n
		for user, err := range bad {
			j.unreadable(res, user, err)
		}
		return err
	})
}
