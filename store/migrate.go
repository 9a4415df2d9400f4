package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// ErrSchemaOutdated is returned by CheckSchema when migrations are pending.
var ErrSchemaOutdated = errors.New("store: database schema is older than this binary needs")

// migrateLock names the MySQL advisory lock that serialises migrators.
const migrateLock = "isle.migrate"

// Migration is one applied migration.
type Migration struct {
	Version int64
	Name    string
}

func provider(db *gorm.DB) (*goose.Provider, *sql.DB, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, err
	}
	p, err := goose.NewProvider(goose.DialectMySQL, sqlDB, MigrationsFS(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, sqlDB, nil
}

// Migrate applies every pending migration, in version order, and returns
// those it applied (none when the schema is current). Concurrent migrators
// wait for each other on a MySQL advisory lock held for the whole run (goose's
// own session lock leaves the creation of its version table outside it:
// two migrators of an empty database then fail with "missing zero version").
func Migrate(ctx context.Context, db *gorm.DB) ([]Migration, error) {
	p, sqlDB, err := provider(db)
	if err != nil {
		return nil, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Close()
	if err := lockMigrations(ctx, conn); err != nil {
		return nil, err
	}
	defer func() { _ = unlockMigrations(context.WithoutCancel(ctx), conn) }() // the lock ends with the connection anyway
	results, err := p.Up(ctx)
	var applied []Migration
	for _, r := range results {
		if r.Error == nil {
			applied = append(applied, Migration{Version: r.Source.Version, Name: r.Source.Path})
		}
	}
	if err != nil {
		return applied, fmt.Errorf("store: migrate: %w", err)
	}
	return applied, nil
}

// SchemaVersion returns the database's version and the newest this binary knows.
func SchemaVersion(ctx context.Context, db *gorm.DB) (current, latest int64, err error) {
	p, _, err := provider(db)
	if err != nil {
		return 0, 0, err
	}
	current, latest, err = p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("store: schema version: %w", err)
	}
	return current, latest, nil
}

// CheckSchema returns ErrSchemaOutdated, saying how to migrate, when the
// database lacks migrations this binary needs. A newer schema is accepted:
// migrations only add.
func CheckSchema(ctx context.Context, db *gorm.DB) error {
	current, latest, err := SchemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if current < latest {
		return fmt.Errorf("%w: it is at version %d, this binary needs %d; run `islectl migrate` with the same MYSQL_DSN", ErrSchemaOutdated, current, latest)
	}
	return nil
}

// lockMigrations takes MySQL's GET_LOCK of migrators on conn; it is held
// until unlockMigrations or until conn closes.
func lockMigrations(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 300)", migrateLock).Scan(&got); err != nil {
		return fmt.Errorf("store: migration lock: %w", err)
	}
	if got.Int64 != 1 {
		return errors.New("store: migration lock: another migrator held it for 5 minutes")
	}
	return nil
}

// unlockMigrations releases the lock of lockMigrations.
func unlockMigrations(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", migrateLock)
	return err
}

// MigrationsFS holds the embedded migration files: Migrate applies them,
// and tools fingerprint the schema with them.
func MigrationsFS() fs.FS {
	sub, _ := fs.Sub(migrationsFS, "migrations") // cannot fail: the directory is embedded above
	return sub
}
