package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Defaults of MySQLConfig.
const (
	MySQLMaxOpenDefault = 32
	MySQLMaxIdleDefault = 16
)

// MySQLConfig selects the database. Zero fields take the defaults.
type MySQLConfig struct {
	DSN          string // go-sql-driver form, e.g. root@tcp(127.0.0.1:3306)/isle
	MaxOpenConns int
	MaxIdleConns int
}

// NormalizeDSN parses dsn and sets what Isle relies on: UTC times parsed
// into time.Time, interpolated parameters (one round trip per statement) and
// bounded dial time. Other settings in dsn are kept.
func NormalizeDSN(dsn string) (*mysql.Config, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: MySQL DSN: %w", err)
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	if _, ok := c.Params["time_zone"]; !ok {
		c.Params["time_zone"] = "'+00:00'"
	}
	return c, nil
}

// OpenMySQL opens a gorm handle on the configured database. It does not
// check the schema; CheckSchema does.
func OpenMySQL(cfg MySQLConfig) (*gorm.DB, error) {
	c, err := NormalizeDSN(cfg.DSN)
	if err != nil {
		return nil, err
	}
	if c.DBName == "" {
		return nil, errors.New("store: MySQL DSN names no database")
	}
	sqlDB, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("store: open MySQL: %w", err)
	}
	sqlDB.SetMaxOpenConns(cmp.Or(cfg.MaxOpenConns, MySQLMaxOpenDefault))
	sqlDB.SetMaxIdleConns(cmp.Or(cfg.MaxIdleConns, MySQLMaxIdleDefault))
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	// No RETURNING on MariaDB 10.5+: the statements are MySQL's, and an
	// INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING answers with the row
	// whether it inserted it or not, so RowsAffected could not tell a new
	// row from a duplicate (store.EnqueueMessage, ApplyNotify depend on it).
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: sqlDB, DisableWithReturning: true}), &gorm.Config{
		SkipDefaultTransaction: true, // single writes need no transaction of their own
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: open MySQL: %w", err)
	}
	return db, nil
}

// CloseMySQL closes the pool behind db.
func CloseMySQL(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// PingMySQL checks that the server answers.
func PingMySQL(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("store: MySQL ping: %w", err)
	}
	return nil
}

// CreateDatabase creates the DSN's database if it does not exist, connecting
// without selecting it.
func CreateDatabase(ctx context.Context, dsn string) error {
	return onServer(ctx, dsn, "create", func(name string) string {
		return "CREATE DATABASE IF NOT EXISTS " + quoteIdent(name) + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
	})
}

// DropDatabase drops the DSN's database if it exists, connecting without
// selecting it: a scratch database (the bench's) goes with everything in
// it.
func DropDatabase(ctx context.Context, dsn string) error {
	return onServer(ctx, dsn, "drop", func(name string) string { return "DROP DATABASE IF EXISTS " + quoteIdent(name) })
}

// onServer runs the statement stmt makes of the DSN's database name on a
// connection to its server that selects no database.
func onServer(ctx context.Context, dsn, what string, stmt func(name string) string) error {
	c, err := NormalizeDSN(dsn)
	if err != nil {
		return err
	}
	name := c.DBName
	if name == "" {
		return errors.New("store: MySQL DSN names no database")
	}
	c.DBName = ""
	sqlDB, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return fmt.Errorf("store: %s database %s: %w", what, name, err)
	}
	defer sqlDB.Close()
	if _, err := sqlDB.ExecContext(ctx, stmt(name)); err != nil {
		return fmt.Errorf("store: %s database %s: %w", what, name, err)
	}
	return nil
}

func quoteIdent(s string) string {
	out := []byte{'`'}
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			out = append(out, '`')
		}
		out = append(out, s[i])
	}
	return string(append(out, '`'))
}
