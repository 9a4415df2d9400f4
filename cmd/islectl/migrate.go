package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/eisland/isle/store"
)

func runMigrate(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(e.out)
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	cfg, _, err := load(e)
	if err != nil {
		return err
	}
	if err := store.CreateDatabase(ctx, cfg.MySQL.DSN); err != nil {
		return err
	}
	db, err := store.OpenMySQL(cfg.MySQL)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	applied, err := store.Migrate(ctx, db)
	for _, m := range applied {
		fmt.Fprintf(e.out, "applied %05d %s\n", m.Version, m.Name)
	}
	if err != nil {
		return err
	}
	current, _, err := store.SchemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(e.out, "schema is current (version %d); nothing to do\n", current)
		return nil
	}
	fmt.Fprintf(e.out, "schema migrated to version %d\n", current)
	return nil
}
