package httpapi

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/store"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
)

// BanCheckIntervalDefault is how often the API compares Redis's ban list
// with MySQL's (Config.BanCheckInterval): a Redis that lost bans, or came
// back from an older snapshot, is rebuilt within about this long.
const BanCheckIntervalDefault = 5 * time.Second

// banCheckRounds bounds the rebuilds of one check: a ban that lands while
// the list is rebuilt leaves Redis one generation behind again.
const banCheckRounds = 3

// banWatch keeps Redis's ban list in step with MySQL's user_ban, the
// source. The ban check asks it whether Redis's answer for a user may be
// stale, and then asks MySQL instead: it fails closed where it can tell.
type banWatch struct {
	bans  *store.Bans
	log   *slog.Logger
	known atomic.Int64 // MySQL's generation at the last check; 0 before it
	stale atomic.Bool  // Redis was found behind MySQL and is not rebuilt yet

	rebuilds  prometheus.Counter
	fromMySQL prometheus.Counter
}

func newBanWatch(db *gorm.DB, r *store.Redis, log *slog.Logger, reg prometheus.Registerer) *banWatch {
	w := &banWatch{bans: store.NewBans(db, r), log: log,
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_ban_rebuilds_total",
			Help: "Times Redis's ban list was found behind MySQL's (lost or older data) and rebuilt from it.",
		}),
		fromMySQL: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "isle_ban_checks_mysql_total",
			Help: "Ban checks MySQL answered because Redis's ban list was behind.",
		}),
	}
	reg.MustRegister(w.rebuilds, w.fromMySQL)
	return w
}

// suspect reports whether Redis's answer for a user, read with its list at
// generation gen, may miss a ban or hold a lifted one: Redis holds no
// generation (it lost its data), one older than MySQL's last seen (it came
// back from an older snapshot), or a rebuild is due.
func (w *banWatch) suspect(gen int64) bool {
	return gen < 0 || gen < w.known.Load() || w.stale.Load()
}

// bannedInMySQL answers a ban check from MySQL; when MySQL fails too it
// keeps Redis's answer (fail open, as for a Redis outage), logged.
func (w *banWatch) bannedInMySQL(ctx context.Context, username string, redisSays bool) bool {
	ctx, cancel := context.WithTimeout(ctx, banCheckTimeout)
	defer cancel()
	banned, err := w.bans.BannedInMySQL(ctx, username)
	if err != nil {
		w.log.WarnContext(ctx, "ban check: Redis's ban list is behind and MySQL failed; keeping Redis's answer",
			"sub", username, "redis_says_banned", redisSays, "err", err)
		return redisSays
	}
	w.fromMySQL.Inc()
	return banned
}

// check compares Redis's generation with MySQL's and, while they differ,
// rebuilds Redis's list from MySQL. Redis is read first: a change that
// commits in between then shows as a difference the next round settles,
// never as a Redis ahead of MySQL.
func (w *banWatch) check(ctx context.Context) error {
	for range banCheckRounds {
		redisGen, err := w.bans.HotGeneration(ctx)
		if err != nil {
			return err
		}
		mysqlGen, err := w.bans.Generation(ctx)
		if err != nil {
			return err
		}
		w.known.Store(mysqlGen)
		if redisGen == mysqlGen {
			w.stale.Store(false)
			return nil
		}
		w.stale.Store(true)
		began := time.Now()
		res, err := w.bans.Rebuild(ctx, redisGen)
		if err != nil {
			return err
		}
		if res.Replaced {
			w.rebuilds.Inc()
			level, msg := slog.LevelWarn, "ban list in Redis was behind MySQL's: rebuilt it from MySQL"
			if redisGen < 0 && res.Generation == 0 {
				level, msg = slog.LevelInfo, "ban list built in Redis (nobody was ever banned)" // a new fleet's first start
			}
			w.log.Log(ctx, level, msg,
				"redis_generation", redisGen, "mysql_generation", res.Generation, "bans", res.Users, "took", time.Since(began))
		}
	}
	return nil // still behind: the next check goes on, and suspect holds meanwhile
}

// CheckBans compares Redis's ban list with MySQL's once and rebuilds it when
// they differ. cmd/api calls it before it serves, so a Redis that lost its
// data has its bans back before the first request.
func (s *Server) CheckBans(ctx context.Context) error { return s.bans.check(ctx) }

// WatchBans runs CheckBans every Config.BanCheckInterval until ctx ends,
// logging failures: a Redis that lost bans or went back in time gets
// MySQL's list back within about one interval, and meanwhile the ban check
// asks MySQL for users whose answer it cannot trust.
func (s *Server) WatchBans(ctx context.Context) {
	t := time.NewTicker(s.cfg.BanCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, max(s.cfg.BanCheckInterval, 10*time.Second))
		if err := s.bans.check(cctx); err != nil && ctx.Err() == nil {
			s.backends.Log.WarnContext(ctx, "ban list check failed; retrying at the next interval", "err", err)
		}
		cancel()
	}
}
