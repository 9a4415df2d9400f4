package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
)

// runPricing manages agent_model_pricing; a change drops the cached copy.
func runPricing(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "set", "list")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("pricing "+sub, flag.ContinueOnError)
	fs.SetOutput(e.out)
	prices := map[string]*string{
		"input":     fs.String("input", "0", "set: fen per million fresh input tokens"),
		"cached":    fs.String("cached", "0", "set: fen per million cached input tokens"),
		"output":    fs.String("output", "0", "set: fen per million output tokens"),
		"reasoning": fs.String("reasoning", "0", "set: fen per million reasoning tokens"),
	}
	disabled := fs.Bool("disabled", false, "set: keep the row but refuse the model")
	pos, err := parseFlags(fs, rest)
	if err != nil {
		return err
	}
	cfg, _, db, err := openDB(e)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	if sub == "list" {
		rows, err := store.NewPrices(db, nil).List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		defer tw.Flush()
		fmt.Fprintln(tw, "MODEL\tINPUT\tCACHED\tOUTPUT\tREASONING\tENABLED\t(fen per million tokens)")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t\n", r.ModelName, r.InputFenPerMTok, r.CachedInputFenPerMTok,
				r.OutputFenPerMTok, r.ReasoningFenPerMTok, r.Enabled)
		}
		return nil
	}
	if len(pos) != 1 {
		return usagef("pricing set MODEL -input FEN -cached FEN -output FEN -reasoning FEN")
	}
	p := store.Pricing{Model: pos[0], Enabled: !*disabled}
	fields := map[string]*decimal.Decimal{"input": &p.Input, "cached": &p.CachedInput, "output": &p.Output, "reasoning": &p.Reasoning}
	for name, raw := range prices {
		d, err := decimal.NewFromString(*raw)
		if err != nil {
			return usagef("-%s %q: not a decimal", name, *raw)
		}
		*fields[name] = d
	}
	rdb, err := openRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := store.NewPrices(db, rdb).Set(ctx, p); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "pricing of %s set (input %s, cached %s, output %s, reasoning %s fen per million tokens); cache dropped\n",
		p.Model, p.Input, p.CachedInput, p.Output, p.Reasoning)
	return nil
}
