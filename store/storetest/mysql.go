package storetest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// MySQLDSN creates an empty database for the test, drops it when the test
// ends, and returns its DSN.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	Services(t)
	name := Unique("isle_t_")
	server := openServer(t) // fails the test with a hint when MySQL is down; drops the database at the end
	dsn := dsnFor(t, name)
	if err := store.CreateDatabase(context.Background(), dsn); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if _, err := server.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
		server.Close()
	})
	return dsn
}

// MySQL returns a gorm handle on a fresh database with every migration
// applied. The tables are copied from a template database migrated once per
// schema version, so each call costs a few milliseconds per table.
func MySQL(t testing.TB) *gorm.DB {
	t.Helper()
	Services(t)
	tpl := template(t)
	dsn := MySQLDSN(t)
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = store.CloseMySQL(db) })
	var tables []string
	if err := db.Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = ?", tpl).Scan(&tables).Error; err != nil {
		t.Fatalf("storetest: list template tables: %v", err)
	}
	for _, tbl := range tables {
		if err := db.Exec("CREATE TABLE " + tbl + " LIKE " + tpl + "." + tbl).Error; err != nil {
			t.Fatalf("storetest: copy table %s: %v", tbl, err)
		}
	}
	if err := db.Exec("INSERT INTO goose_db_version SELECT * FROM " + tpl + ".goose_db_version").Error; err != nil {
		t.Fatalf("storetest: copy schema version: %v", err)
	}
	return db
}

// template returns the name of a database migrated to the embedded schema,
// creating it if needed. Its name carries a hash of the migrations, so a
// changed schema gets a new template; concurrent test binaries wait for each
// other on an advisory lock.
func template(t testing.TB) string {
	t.Helper()
	name := "isle_tpl_" + migrationsHash(t)
	server := openServer(t)
	defer server.Close()
	ctx := context.Background()
	conn, err := server.Conn(ctx)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('isle.storetest.template', 120)").Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("storetest: template lock: %v", err)
	}
	defer func() { _, _ = conn.ExecContext(ctx, "SELECT RELEASE_LOCK('isle.storetest.template')") }() // or with the connection
	sweepOnce.Do(func() { sweep(ctx, conn, name) })
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	if n == 1 {
		return name
	}
	dsn := dsnFor(t, name)
	if err := store.CreateDatabase(ctx, dsn); err != nil { // on a connection of its own; conn holds the lock meanwhile
		t.Fatalf("storetest: create template: %v", err)
	}
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	defer store.CloseMySQL(db)
	if _, err := store.Migrate(ctx, db); err != nil {
		_, _ = conn.ExecContext(ctx, "DROP DATABASE "+name)
		t.Fatalf("storetest: migrate template: %v", err)
	}
	return name
}

var sweepOnce sync.Once

// Leftovers older than these are dropped: a killed test run cannot drop its
// databases, and each schema version leaves a template.
const (
	sweepTestAge     = 3 * time.Hour
	sweepTemplateAge = 24 * time.Hour
)

// sweep drops the test databases of killed runs and the templates of other
// schema versions, once they are old enough not to belong to a run still
// going (of this checkout or another).
func sweep(ctx context.Context, conn *sql.Conn, current string) {
	rows, err := conn.QueryContext(ctx, `SELECT table_schema, TIMESTAMPDIFF(SECOND, MIN(create_time), NOW()) FROM information_schema.tables
		WHERE table_schema LIKE 'isle\_t\_%' OR table_schema LIKE 'isle\_tpl\_%' GROUP BY table_schema`)
	if err != nil {
		return // best effort
	}
	var old []string
	for rows.Next() {
		var name string
		var seconds sql.NullInt64
		if rows.Scan(&name, &seconds) != nil || !seconds.Valid || name == current {
			continue
		}
		age := time.Duration(seconds.Int64) * time.Second
		if strings.HasPrefix(name, "isle_tpl_") && age > sweepTemplateAge || strings.HasPrefix(name, "isle_t_") && age > sweepTestAge {
			old = append(old, name)
		}
	}
	rows.Close()
	for _, name := range old {
		_, _ = conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
	}
}

func migrationsHash(t testing.TB) string {
	t.Helper()

	h := sha256.New()
	files, err := fs.Glob(store.MigrationsFS(), "*.sql")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := fs.ReadFile(store.MigrationsFS(), f)
		if err != nil {
			t.Fatalf("storetest: %v", err)
		}
		h.Write([]byte(f))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func openServer(t testing.TB) *sql.DB {
	t.Helper()
	c, err := mysql.ParseDSN(MySQLServerDSN())
	if err != nil {
		t.Fatalf("storetest: %s: %v", EnvMySQL, err)
	}
	c.DBName = ""
	c.Timeout = 5 * time.Second
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	if err := db.Ping(); err != nil {
		t.Fatalf("storetest: MySQL at %s is not reachable (scripts/test starts it): %v", MySQLServerDSN(), err)
	}
	return db
}

func dsnFor(t testing.TB, dbName string) string {
	t.Helper()

	c, err := mysql.ParseDSN(MySQLServerDSN())
	if err != nil {
		t.Fatalf("storetest: %s: %v", EnvMySQL, err)
	}
	c.DBName = dbName
	return c.FormatDSN()
}
