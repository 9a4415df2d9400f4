package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

func runDLQ(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "list", "show", "replay")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(e.out)
	domain := fs.String("domain", "", "list, replay --all: only this domain")
	since := fs.String("since", "", `list: dead at or after, a duration ("24h") or a time (RFC 3339)`)
	all := fs.Bool("all", false, "replay: every row of --domain not replayed yet; list: include replayed rows")
	force := fs.Bool("force", false, "replay: replay rows that were replayed before")
	limit := fs.Int("limit", 100, "list: rows per domain; replay --all: most rows")
	pos, err := parseFlags(fs, rest)
	if err != nil {
		return err
	}
	cfg, tp, db, err := openDB(e)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	dead := dlq.NewStore(db, tp)

	switch sub {
	case "list":
		if len(pos) > 0 {
			return usagef("dlq list takes no arguments, only flags")
		}
		f := dlq.Filter{NotReplayed: !*all, Limit: *limit}
		if *domain != "" {
			f.Domains = []string{*domain}
		}
		if f.Since, err = parseSince(*since, time.Now()); err != nil {
			return usagef("--since: %v", err)
		}
		entries, err := dead.List(ctx, f)
		if err != nil {
			return err
		}
		printEntries(e.out, entries)
		return nil
	case "show":
		if len(pos) != 1 {
			return usagef("dlq show takes one id, e.g. email/12")
		}
		ref, err := dlq.ParseRef(pos[0])
		if err != nil {
			return usagef("%v", err)
		}
		entry, err := dead.Get(ctx, ref)
		if err != nil {
			return err
		}
		return printEntry(e.out, entry)
	default:
		return replay(ctx, e, cfg, tp, dead, pos, *domain, *all, *force, *limit)
	}
}

func replay(ctx context.Context, e env, cfg config.Islectl, tp *topology.Topology, dead *dlq.Store,
	ids []string, domain string, all, force bool, limit int) error {
	var refs []dlq.Ref
	for _, id := range ids {
		ref, err := dlq.ParseRef(id)
		if err != nil {
			return usagef("%v", err)
		}
		refs = append(refs, ref)
	}
	switch {
	case all && (domain == "" || len(refs) > 0):
		return usagef("dlq replay --all needs --domain and no ids")
	case !all && len(refs) == 0:
		return usagef("dlq replay takes ids (email/12 ...) or --domain D --all")
	}
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{
		URL: cfg.AMQP.URL, URLs: cfg.AMQP.URLs, Name: "islectl", Timeout: cfg.AMQP.PublishTimeout, Channels: 2,
	}, tp, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer pub.Close()
	if all {
		res, err := dead.ReplayAll(ctx, pub, domain, force, limit)
		fmt.Fprintf(e.out, "replayed %d, skipped %d (replayed before), failed %d\n", res.Replayed, res.Skipped, res.Failed)
		return err
	}
	var errs []error
	for _, ref := range refs {
		if err := dead.Replay(ctx, pub, ref, force); err != nil {
			fmt.Fprintf(e.out, "%s: %v\n", ref, err)
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(e.out, "%s: replayed\n", ref)
	}
	return errors.Join(errs...)
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339, s)
}

func printEntries(w io.Writer, entries []dlq.Entry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "ID\tDEAD AT\tRETRIES\tBYTES\tSUBJECT\tREPLAYED\tLAST ERROR")
	for _, e := range entries {
		replayed := "-"
		if e.ReplayedAt != nil {
			replayed = fmt.Sprintf("%s (%dx)", e.ReplayedAt.UTC().Format(time.RFC3339), e.ReplayCount)
		}
		last := ""
		if e.LastError != nil {
			last = oneLine(*e.LastError, 80)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.Ref, e.DeadAt.UTC().Format(time.RFC3339), e.RetryCount, e.BodyBytes,
			oneLine(e.Subject, 40), replayed, last)
	}
}

func printEntry(w io.Writer, e dlq.Entry) error {
	fmt.Fprintf(w, "id:          %s\nqueue:       %s\nrouting key: %s\nmessage id:  %s\ntype:        %s\ntrace id:    %s\nsubject:     %s\ndead at:     %s\nretries:     %d\n",
		e.Ref, e.Queue, e.RoutingKey, e.MessageID, e.MessageType, e.TraceID, e.Subject, e.DeadAt.UTC().Format(time.RFC3339Nano), e.RetryCount)
	if e.LastError != nil {
		fmt.Fprintf(w, "last error:  %s\n", *e.LastError)
	}
	if e.ReplayedAt != nil {
		fmt.Fprintf(w, "replayed:    %s (%d times)\n", e.ReplayedAt.UTC().Format(time.RFC3339), e.ReplayCount)
	}
	fmt.Fprintf(w, "headers (%d bytes):\n%s\nbody (%d bytes):\n%s\n",
		len(e.Headers), indentJSON([]byte(e.Headers)), len(e.Body), indentJSON(e.Body))
	return nil
}

// indentJSON indents a JSON text as it is stored (json.Indent keeps every
// number's digits and the members' order); any other text is returned as is.
func indentJSON(b []byte) string {
	var out bytes.Buffer
	out.WriteString("  ")
	if json.Indent(&out, b, "  ", "  ") != nil {
		return string(b)
	}
	return out.String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
