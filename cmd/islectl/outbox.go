package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/store"
)

// runOutbox lists the outbox rows the relay parked and replays them once
// mended (doc/outbox.md, "Rows that cannot be published").
func runOutbox(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "parked", "replay")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("outbox "+sub, flag.ContinueOnError)
	fs.SetOutput(e.out)
	table := fs.String("table", "outbox", "replay: the table of the ids (outbox or object_outbox)")
	all := fs.Bool("all", false, "replay: every parked row of --table")
	limit := fs.Int("limit", 100, "parked: rows per table")
	pos, err := parseFlags(fs, rest)
	if err != nil {
		return err
	}
	_, _, db, err := openDB(e)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)

	if sub == "parked" {
		if len(pos) > 0 {
			return usagef("outbox parked takes no arguments, only flags")
		}
		rows, counts, err := store.ParkedOutbox(ctx, db, *limit)
		if err != nil {
			return err
		}
		printParked(e.out, rows, counts)
		return nil
	}
	var ids []uint64
	for _, p := range pos {
		id, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return usagef("outbox replay: %q is not a row id", p)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 && !*all {
		return usagef("outbox replay takes row ids of --table, or --all")
	}
	if len(ids) > 0 && *all {
		return usagef("outbox replay: ids or --all, not both")
	}
	n, err := store.UnparkOutbox(ctx, db, *table, ids)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%d parked rows of %s due again; the relay publishes them, or parks again those still unpublishable\n", n, *table)
	return nil
}

func printParked(w io.Writer, rows []store.ParkedRow, counts map[string]int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tID\tWHAT\tATTEMPTS\tCREATED\tPARKED\tERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Table, r.ID, r.What, r.Attempts,
			r.CreatedAt.UTC().Format(time.RFC3339), r.ParkedAt.UTC().Format(time.RFC3339), r.LastError)
	}
	_ = tw.Flush()
	for _, t := range store.OutboxTables {
		fmt.Fprintf(w, "%s: %d parked\n", t, counts[t])
	}
}
