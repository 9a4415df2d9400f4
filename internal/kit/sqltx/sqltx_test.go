package sqltx_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/store/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func TestTransactCommitsAndRollsBack(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	require.NoError(t, sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		return tx.Exec("INSERT INTO user_account (username) VALUES ('kept')").Error
	}))
	boom := errors.New("boom")
	require.ErrorIs(t, sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		require.NoError(t, tx.Exec("INSERT INTO user_account (username) VALUES ('dropped')").Error)
		return boom
	}), boom)
	require.Panics(t, func() {
		_ = sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
			require.NoError(t, tx.Exec("INSERT INTO user_account (username) VALUES ('panicked')").Error)
			panic("handler bug")
		})
	})
	var names []string
	require.NoError(t, db.Raw("SELECT username FROM user_account ORDER BY username").Scan(&names).Error)
	require.Equal(t, []string{"kept"}, names)
}

// Two transactions that lock two rows in opposite orders deadlock; InnoDB
// kills one, and Transact runs it again, so both land.
func TestTransactRetriesDeadlocks(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	require.NoError(t, db.Exec("INSERT INTO user_account (username, balance_fen) VALUES ('a', 0), ('b', 0)").Error)

	var attempts atomic.Int32
	var both sync.WaitGroup
	both.Add(2)
	transfer := func(first, second string) error {
		return sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
			n := attempts.Add(1)
			if err := tx.Exec("UPDATE user_account SET balance_fen = balance_fen + 1 WHERE username = ?", first).Error; err != nil {
				return err
			}
			if n <= 2 { // first attempts: hold the first lock until the other holds its own
				both.Done()
				both.Wait()
			}
			return tx.Exec("UPDATE user_account SET balance_fen = balance_fen + 1 WHERE username = ?", second).Error
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- transfer("a", "b") }()
	go func() { errs <- transfer("b", "a") }()
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.GreaterOrEqual(t, attempts.Load(), int32(3), "one transaction was re-run")
	var total float64
	require.NoError(t, db.Raw("SELECT SUM(balance_fen) FROM user_account").Scan(&total).Error)
	require.EqualValues(t, 4, total, "each transfer applied once")
}

// Retry runs a statement again after a deadlock or a lock-wait timeout, up
// to the attempts Transact has, and not after any other error.
func TestRetryRunsAStatementAgainOnlyWhenRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var runs int
	failing := func(errs ...error) func() error {
		runs = 0
		return func() error {
			runs++
			if runs <= len(errs) {
				return errs[runs-1]
			}
			return nil
		}
	}
	deadlock, timeout := &mysql.MySQLError{Number: sqltx.ErrNumDeadlock}, &mysql.MySQLError{Number: sqltx.ErrNumLockTimeout}
	require.NoError(t, sqltx.Retry(ctx, failing(deadlock, timeout)))
	require.Equal(t, 3, runs)
	require.ErrorIs(t, sqltx.Retry(ctx, failing(deadlock, deadlock, deadlock, deadlock, deadlock, deadlock)), deadlock)
	require.Equal(t, 5, runs, "given up after five")
	other := &mysql.MySQLError{Number: sqltx.ErrNumDuplicate}
	require.ErrorIs(t, sqltx.Retry(ctx, failing(other)), other)
	require.Equal(t, 1, runs)
}
