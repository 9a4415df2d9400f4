package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// runUsers manages user_account rows and bans for local use.
func runUsers(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "create", "credit", "ban", "unban", "bans")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("users "+sub, flag.ContinueOnError)
	fs.SetOutput(e.out)
	email := fs.String("email", "", "create: the user's email")
	balance := fs.String("balance", "0", "create: opening agent balance in fen (written with a RECHARGE ledger entry)")
	reason := fs.String("reason", "", "ban, credit: why")
	id := fs.String("id", "", "credit: the credit's id, kept as islectl:ID; the same id credits once (default: a new one)")
	pos, err := parseFlags(fs, rest)
	if err != nil {
		return err
	}
	switch {
	case sub == "bans" && len(pos) != 0:
		return usagef("users bans takes no arguments")
	case sub == "credit" && len(pos) != 2:
		return usagef("users credit USER FEN [-id ID] [-reason R]")
	case sub != "bans" && sub != "credit" && len(pos) != 1:
		return usagef("users %s takes one username", sub)
	}
	cfg, _, db, err := openDB(e)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	switch sub {
	case "create":
		return createUser(ctx, e, db, pos[0], *email, *balance)
	case "bans":
		return listBans(ctx, e, db)
	}
	rdb, err := openRedis(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	switch sub {
	case "credit":
		return creditUser(ctx, e, store.NewBalances(db, rdb), pos[0], pos[1], *id, *reason)
	case "ban":
		if err := store.NewBans(db, rdb).Ban(ctx, pos[0], *reason); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "banned %s\n", pos[0])
		return nil
	}
	was, err := store.NewBans(db, rdb).Unban(ctx, pos[0])
	if err != nil {
		return err
	}
	if !was {
		fmt.Fprintf(e.out, "%s was not banned\n", pos[0])
		return nil
	}
	fmt.Fprintf(e.out, "unbanned %s\n", pos[0])
	return nil
}

// createUser is users create: an account with its opening balance.
func createUser(ctx context.Context, e env, db *gorm.DB, username, email, balance string) error {
	opening, err := decimal.NewFromString(balance)
	if err != nil {
		return usagef("-balance %q: not a decimal", balance)
	}
	u, err := store.NewAccounts(db).Create(ctx, username, email, opening)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "created user %s (id %d) with balance %s fen\n", u.Username, u.ID, u.BalanceFen.StringFixed(store.MoneyScale))
	return nil
}

// listBans is users bans: the banned users, oldest ban first.
func listBans(ctx context.Context, e env, db *gorm.DB) error {
	bans, err := store.NewBans(db, nil).List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "USER\tBANNED AT\tREASON")
	for _, b := range bans {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Username, b.BannedAt.UTC().Format(time.RFC3339), b.Reason)
	}
	return nil
}

// creditUser is users credit: an operator's credit, once per id (a new id
// when none is given).
func creditUser(ctx context.Context, e env, balances *store.Balances, username, fen, id, reason string) error {
	amount, err := decimal.NewFromString(fen)
	if err != nil {
		return usagef("credit amount %q: not a decimal", fen)
	}
	if id == "" {
		id = time.Now().UTC().Format("20060102T150405.000000000")
	}
	id = store.OperatorCreditID(id) // never a paid order's or an opening balance's
	res, err := balances.Credit(ctx, store.Credit{Username: username, ID: id, Amount: amount, Reason: reason, Source: "islectl"})
	if err != nil {
		return err
	}
	if !res.Applied {
		fmt.Fprintf(e.out, "credit %s was applied before; nothing changed\n", id)
		return nil
	}
	fmt.Fprintf(e.out, "credited %s fen to %s (ledger entry %s, Redis: %s)\n", amount.StringFixed(store.MoneyScale), username, id, res.Settle)
	return nil
}

// runToken mints a bearer token for local use, with the API's key.
func runToken(_ context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(e.out)
	user := fs.String("user", "", "the token's sub: a username or a service's name")
	role := fs.String("role", "user", "user, service or admin")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 || *user == "" {
		return usagef("token -user NAME [-role user|service|admin] [-ttl 24h]")
	}
	cfg, _, err := load(e)
	if err != nil {
		return err
	}
	key, err := cfg.JWT.Key()
	if err != nil {
		return err
	}
	tok, err := httpapi.MintToken(key, *user, httpapi.Role(*role), *ttl, time.Now())
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprintln(e.out, tok)
	return nil
}
