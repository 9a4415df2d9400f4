package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/internal/httpapi"
	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
)

// runUsers manages user_account rows and bans for local use.
func runUsers(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "create", "ban", "unban", "bans")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("users "+sub, flag.ContinueOnError)
	fs.SetOutput(e.out)
	email := fs.String("email", "", "create: the user's email")
	balance := fs.String("balance", "0", "create: opening agent balance in fen (written with a RECHARGE ledger entry)")
	reason := fs.String("reason", "", "ban: why")
	pos, err := parseFlags(fs, rest)
	if err != nil {
		return err
	}
	if sub == "bans" {
		if len(pos) != 0 {
			return usagef("users bans takes no arguments")
		}
	} else if len(pos) != 1 {
		return usagef("users %s takes one username", sub)
	}
	cfg, _, err := load(e)
	if err != nil {
		return err
	}
	db, err := store.OpenMySQL(cfg.MySQL)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	if sub == "create" {
		opening, err := decimal.NewFromString(*balance)
		if err != nil {
			return usagef("-balance %q: not a decimal", *balance)
		}
		u, err := store.CreateUser(ctx, db, pos[0], *email, opening)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "created user %s (id %d) with balance %s fen\n", u.Username, u.ID, u.BalanceFen.StringFixed(store.MoneyScale))
		return nil
	}
	if sub == "bans" {
		var bans []store.UserBan
		if err := db.WithContext(ctx).Order("banned_at").Find(&bans).Error; err != nil {
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
	rdb, err := store.OpenRedis(cfg.Redis.RedisConfig)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if sub == "ban" {
		if err := store.Ban(ctx, db, rdb, pos[0], *reason); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "banned %s\n", pos[0])
		return nil
	}
	was, err := store.Unban(ctx, db, rdb, pos[0])
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
	tok, err := httpapi.MintToken(cfg.JWT.Secret, *user, httpapi.Role(*role), *ttl, time.Now())
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprintln(e.out, tok)
	return nil
}
