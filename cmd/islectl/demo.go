package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// islectl demo drives a little of everything through a running fleet, as
// its users and gateways would, then reads back what took effect. Its
// limits are the API's: the email codes and avatars are counted per client
// IP (3 an hour each), so a second run within the hour sees 429s, which the
// summary reports.
const (
	demoDurationDefault = 40 * time.Second
	demoWaitDefault     = 30 * time.Second
	demoUsersDefault    = 5
	demoUsersMax        = 50
	// demoCodesDefault is the API's limit of email codes per client IP and
	// hour: more only go through with an API that trusts a proxy on this
	// machine (API_TRUSTED_PROXIES=127.0.0.1), each 3 from another
	// X-Forwarded-For address.
	demoCodesDefault   = 3
	demoOpeningFen     = 10000 // a new demo user's opening balance
	demoModel          = "gpt-demo"
	demoMailDirDefault = "var/mail"
	demoMailpitDefault = "http://127.0.0.1:8025"
	demoInFlight       = 8 // steps running at once
	demoTokenTTL       = time.Hour
)

type demoFlags struct {
	api      string
	duration time.Duration
	wait     time.Duration
	users    int
	codes    int
	payKeys  string
	mailDir  string
	mailpit  string
}

// demoUser is a user the demo acts as.
type demoUser struct {
	Name, Email string
	ID          uint64
	Created     bool            // by this run; else reused
	Token       string          // a user token
	Before      decimal.Decimal // MySQL's balance at the start
	ProBefore   *time.Time      // pro_expire_at at the start
}

// demo is one run: its connections, users and what it sent.
type demo struct {
	flags       demoFlags
	run         string // in every id the demo makes
	began       time.Time
	api         *demoClient
	db          *gorm.DB
	rdb         *store.Redis
	cfg         config.Islectl
	tp          *topology.Topology
	keys        *payKeys
	noPay       string // why payments are skipped; "" when they run
	service     string // a service token (agent usage)
	users       []demoUser
	ledgerMark  uint64 // the highest agent_ledger id before the run
	trafficTook time.Duration
	trafficEnd  time.Time
	proPrice    int64

	mu        sync.Mutex
	charges   int      // distinct request ids that deducted something
	usageIDs  []string // the usage messages' request ids (user:requestId)
	replays   int
	alone     []map[string]any // bodies of the charges sent alone that deducted, to send again in a batch
	batches   batchTally
	certified []string // certify ids of the passes the API took
	orders    []demoOrder
	objects   []demoObject
	best      map[[2]string]int64 // by user and game: the best score accepted
	codesTo   []string            // addresses a code was accepted for
	stepsDone int
}

// runDemo is `islectl demo`.
func runDemo(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(e.out)
	var f demoFlags
	fs.StringVar(&f.api, "api", "", "the API's base URL (default: API_ADDR's, http://127.0.0.1:8080)")
	fs.DurationVar(&f.duration, "duration", demoDurationDefault, "how long the traffic lasts (5s..10m)")
	fs.DurationVar(&f.wait, "wait", demoWaitDefault, "how long to wait after it for the effects to appear")
	fs.IntVar(&f.users, "users", demoUsersDefault, "demo users, demo-01..demo-NN (1..50); created when missing, reused after")
	fs.IntVar(&f.codes, "codes", demoCodesDefault, "email codes to ask for; the API allows 3 an hour per client IP (more need API_TRUSTED_PROXIES=127.0.0.1)")
	fs.StringVar(&f.payKeys, "paykeys", payKeysDirDefault, "the local test gateway keys (islectl pay keys) that sign the payment callbacks")
	fs.StringVar(&f.mailDir, "mail-dir", demoMailDirDefault, "where the fleet writes mails as .eml files when Mailpit is not used (EMAIL_MAILER_URL file://)")
	fs.StringVar(&f.mailpit, "mailpit", demoMailpitDefault, "Mailpit's web UI and API, where scripts/up's fleet sends mails (unless ISLE_NO_MAILPIT=1)")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("demo takes no arguments, only flags")
	}
	switch {
	case f.duration < 5*time.Second || f.duration > 10*time.Minute:
		return usagef("-duration %s: want 5s..10m", f.duration)
	case f.wait < 0 || f.wait > 10*time.Minute:
		return usagef("-wait %s: want 0..10m", f.wait)
	case f.users < 1 || f.users > demoUsersMax:
		return usagef("-users %d: want 1..%d", f.users, demoUsersMax)
	case f.codes < 0 || f.codes > 30:
		return usagef("-codes %d: want 0..30", f.codes)
	}
	d, closeAll, err := prepareDemo(ctx, e, f)
	if err != nil {
		return err
	}
	defer closeAll()
	d.traffic(ctx, e)
	fx := d.settle(ctx, e)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return d.summarize(ctx, e.out, fx)
}

// prepareDemo checks the fleet answers, opens MySQL and Redis, and sets up
// the users, the model price and the payment keys.
func prepareDemo(ctx context.Context, e env, f demoFlags) (*demo, func(), error) {
	cfg, tp, err := load(e)
	if err != nil {
		return nil, nil, err
	}
	base := f.api
	if base == "" {
		if base, err = cfg.APIURL(); err != nil {
			return nil, nil, err
		}
	}
	d := &demo{flags: f, run: newRunID(), began: time.Now(), api: newDemoClient(base), cfg: cfg, tp: tp,
		best: map[[2]string]int64{}}
	if err := d.checkAPI(ctx); err != nil {
		return nil, nil, err
	}
	if d.db, err = store.OpenMySQL(cfg.MySQL); err == nil {
		err = store.PingMySQL(ctx, d.db)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("MySQL (MYSQL_DSN): %w: start the fleet with scripts/up", err)
	}
	if d.rdb, err = openRedis(cfg); err == nil {
		err = d.rdb.Ping(ctx)
	}
	if err != nil {
		store.CloseMySQL(d.db)
		return nil, nil, fmt.Errorf("redis (REDIS_HOST): %w: start the fleet with scripts/up", err)
	}
	closeAll := func() { d.rdb.Close(); store.CloseMySQL(d.db) }
	if err := d.setUp(ctx, e); err != nil {
		closeAll()
		return nil, nil, err
	}
	return d, closeAll, nil
}

func newRunID() string {
	b := make([]byte, 3)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// checkAPI fails unless the API answers /healthz and /readyz.
func (d *demo) checkAPI(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a := d.api.send(ctx, apiCall{method: http.MethodGet, path: "/healthz"})
	if a.Err != nil || a.Status != http.StatusOK {
		return fmt.Errorf("no Isle API answers at %s (%s): start the fleet with scripts/up (or name its API with -api or API_ADDR)",
			d.api.base, a.reason())
	}
	if a = d.api.send(ctx, apiCall{method: http.MethodGet, path: "/readyz"}); a.Status != http.StatusOK {
		return fmt.Errorf("the API at %s is not ready (%s): check the fleet's services, or restart it with scripts/up",
			d.api.base, a.reason())
	}
	return nil
}

// setUp makes the tokens, users, model price and payment keys ready.
func (d *demo) setUp(ctx context.Context, e env) error {
	key, err := d.cfg.JWT.Key()
	if err != nil {
		return err
	}
	if d.service, err = httpapi.MintToken(key, "islectl-demo", httpapi.RoleService, demoTokenTTL, time.Now()); err != nil {
		return err
	}
	if a := d.api.send(ctx, apiCall{method: http.MethodGet, path: "/v1/me", token: d.service}); a.Status != http.StatusOK {
		return fmt.Errorf("the API refused a token signed with islectl's key (%s): run islectl from the repository's root, "+
			"where scripts/up keeps var/jwt-secret, or with the fleet's API_JWT_SECRET", a.reason())
	}
	if err := d.ensureUsers(ctx, key); err != nil {
		return err
	}
	// After the users' opening balances: the summary's ledger rows are the run's.
	mark, err := store.NewLedger(d.db).LastID(ctx)
	if err != nil {
		return err
	}
	d.ledgerMark = mark
	price := store.Pricing{Model: demoModel, Input: decimal.NewFromInt(2000), Output: decimal.NewFromInt(8000), Enabled: true}
	if err := store.NewPrices(d.db, d.rdb).Set(ctx, price); err != nil {
		return err
	}
	if d.proPrice, err = store.NewOrders(d.db, d.rdb).ProMonthPrice(ctx); err != nil {
		return err
	}
	k, err := loadPayKeys(d.flags.payKeys)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.noPay = fmt.Sprintf("no test gateway keys in %s: scripts/up makes them on its first run when no PAYMENT_ALIPAY_* or PAYMENT_WECHAT_* variable is set "+
			"(or: islectl pay keys -dir %s, then restart the API with ISLE_DEV=1 and . %s/%s)", d.flags.payKeys, d.flags.payKeys, d.flags.payKeys, payEnvFile)
	case err != nil:
		d.noPay = err.Error()
	default:
		d.keys = &k
	}
	fmt.Fprintf(e.progress, "demo %s: %d users (%s..%s), %s of traffic against %s, then up to %s for the effects\n",
		d.run, len(d.users), d.users[0].Name, d.users[len(d.users)-1].Name, d.flags.duration, d.api.base, d.flags.wait)
	if d.noPay != "" {
		fmt.Fprintf(e.progress, "payments skipped: %s\n", d.noPay)
	}
	return nil
}

// ensureUsers creates demo-01.. with an opening balance and an email, or
// reuses them, and checks the API sees them.
func (d *demo) ensureUsers(ctx context.Context, key []byte) error {
	accounts := store.NewAccounts(d.db)
	for i := range d.flags.users {
		u := demoUser{Name: fmt.Sprintf("demo-%02d", i+1)}
		u.Email = u.Name + "@example.com"
		acc, err := accounts.Create(ctx, u.Name, u.Email, decimal.NewFromInt(demoOpeningFen))
		u.Created = err == nil
		if errors.Is(err, store.ErrUserExists) {
			acc, err = accounts.Get(ctx, u.Name)
		}
		if err != nil {
			return err
		}
		if acc.Email != nil {
			u.Email = *acc.Email
		}
		u.ID, u.Before, u.ProBefore = acc.ID, acc.BalanceFen, acc.ProExpireAt
		if u.Token, err = httpapi.MintToken(key, u.Name, httpapi.RoleUser, demoTokenTTL, time.Now()); err != nil {
			return err
		}
		var bal struct{}
		a, err := d.api.getJSON(ctx, "balance", "/v1/agent/balance", u.Token, &bal)
		if a.Status == http.StatusNotFound {
			return fmt.Errorf("the API has no account %s, which islectl has in the database of MYSQL_DSN: "+
				"run islectl with the fleet's MYSQL_DSN", u.Name)
		}
		if err != nil {
			return fmt.Errorf("the balance of %s: %w", u.Name, err)
		}
		d.users = append(d.users, u)
	}
	return nil
}
