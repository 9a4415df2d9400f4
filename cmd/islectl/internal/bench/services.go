package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keyclean"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// The Redis and MySQL baselines' settings.
const (
	redisGoroutines   = 32
	redisPrefix       = "isle-bench-base:"
	mysqlBatchRows    = 100
	mysqlBaseTable    = "isle_bench_rows"
	baselineUserCount = 200
	deductRetries     = 3 // tries again of a deduction whose answer did not come
)

// redisDeduct runs deduct.lua through go-redis (store.Balances.Deduct, as
// the API does) from redisGoroutines goroutines for dur, on balances of its
// own under a prefix of its own, which it deletes afterwards.
func redisDeduct(ctx context.Context, cfg store.RedisConfig, dur time.Duration) (Rate, error) {
	cfg.KeyPrefix = redisPrefix
	rdb, err := store.OpenRedis(cfg)
	if err != nil {
		return Rate{}, err
	}
	defer rdb.Close()
	defer func() { _ = wipeRedis(context.WithoutCancel(ctx), rdb) }()
	balances := store.NewBalances(nil, rdb)
	for i := range baselineUserCount {
		read := store.BalanceRead{Balance: decimal.New(1, 12)}
		if _, err := balances.Init(ctx, fmt.Sprintf("u%03d", i), read); err != nil {
			return Rate{}, err
		}
	}
	amount := decimal.RequireFromString("0.30000000")
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var n atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	began := time.Now()
	for range redisGoroutines {
		wg.Go(func() {
			for !over(ctx) {
				i := n.Add(1)
				req := store.DeductRequest{Username: fmt.Sprintf("u%03d", i%baselineUserCount), ID: fmt.Sprintf("d%d", i),
					Amount: amount, Now: time.Now(), Ref: store.NewRef(), RequestHash: "fedcba9876543210",
					Usage: &store.UsageData{Model: "m", Input: 1200, Cached: 200, Output: 350, CostMF: 30000000}}
				_, err := balances.Deduct(ctx, req)
				// Deduct sends once; as the API does, a try that did not
				// answer (a timeout on a loaded machine) goes again, the same
				// request, which the script answers once.
				for try := 0; !store.Answered(err) && try < deductRetries && !over(ctx); try++ {
					_, err = balances.Deduct(ctx, req)
				}
				if err != nil && !over(ctx) {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	if err, ok := firstErr.Load().(error); ok {
		return Rate{}, err
	}
	return rateOf(n.Load()-redisGoroutines, took), nil // the calls cut off by the deadline did not finish
}

// wipeRedis deletes every key under r's prefix in every database.
func wipeRedis(ctx context.Context, r *store.Redis) error {
	if r.Keys().Prefix() == "" {
		return fmt.Errorf("bench: refusing to wipe a Redis without a key prefix")
	}
	var all []keyclean.Pattern
	seen := map[*redis.Client]bool{}
	for _, db := range keys.DBs() {
		if c := r.Client(db); !seen[c] {
			seen[c] = true
			all = append(all, keyclean.Pattern{DB: db, Pattern: "*"})
		}
	}
	_, err := keyclean.Volatile(ctx, r, all)
	return err
}

// mysqlBatch inserts n ledger-like rows in statements of mysqlBatchRows,
// autocommitted, over one connection, into a table of its own that it
// drops afterwards.
func mysqlBatch(ctx context.Context, db *gorm.DB, n int) (Rate, error) {
	conn := db.WithContext(ctx)
	_ = conn.Exec("DROP TABLE IF EXISTS " + mysqlBaseTable).Error
	err := conn.Exec(`CREATE TABLE ` + mysqlBaseTable + ` (
		id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
		username VARCHAR(64) NOT NULL,
		entry_id VARCHAR(128) NOT NULL,
		amount_fen DECIMAL(20,8) NOT NULL,
		model_name VARCHAR(128) NULL,
		occurred_at DATETIME(3) NOT NULL,
		UNIQUE KEY uk_entry (username, entry_id)
	) ENGINE=InnoDB`).Error
	if err != nil {
		return Rate{}, err
	}
	defer func() {
		_ = db.WithContext(context.WithoutCancel(ctx)).Exec("DROP TABLE IF EXISTS " + mysqlBaseTable).Error
	}()
	sqlDB, err := db.DB()
	if err != nil {
		return Rate{}, err
	}
	c, err := sqlDB.Conn(ctx)
	if err != nil {
		return Rate{}, err
	}
	defer c.Close()
	now := time.Now().UTC()
	began := time.Now()
	for start := 0; start < n; start += mysqlBatchRows {
		var q strings.Builder
		q.WriteString("INSERT INTO " + mysqlBaseTable + " (username, entry_id, amount_fen, model_name, occurred_at) VALUES ")
		args := make([]any, 0, 5*mysqlBatchRows)
		for i := start; i < min(n, start+mysqlBatchRows); i++ {
			if i > start {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?)")
			args = append(args, fmt.Sprintf("u%03d", i%baselineUserCount), fmt.Sprintf("e%d", i), "-0.30000000", "m", now)
		}
		if _, err := c.ExecContext(ctx, q.String(), args...); err != nil {
			return Rate{}, err
		}
	}
	return rateOf(int64(n), time.Since(began)), nil
}

// over reports whether ctx is done or its deadline has passed. The Redis
// client's socket deadline is the context's (ContextTimeoutEnabled), and the
// socket may time out a moment before the context's own timer marks it
// done: such a timeout is the deadline cutting a call off, not a failure.
func over(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
