package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
)

func runTopology(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "show", "apply", "verify")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("topology "+sub, flag.ContinueOnError)
	fs.SetOutput(e.out)
	asJSON := fs.Bool("json", false, "show: print JSON")
	amqpOnly := fs.Bool("amqp-only", false, "verify: do not use the management API (bindings are then not checked)")
	if pos, err := parseFlags(fs, rest); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	cfg, tp, err := load(e)
	if err != nil {
		return err
	}
	switch sub {
	case "show":
		if *asJSON {
			return showJSON(e.out, tp)
		}
		showTable(e.out, tp)
		return nil
	case "apply":
		conn, err := dial(cfg.AMQP)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := tp.Declare(conn); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "declared %d exchanges and %d queues with their bindings under prefix %q\n",
			len(tp.Exchanges()), len(tp.Queues()), tp.Prefix())
		return nil
	default:
		return verify(ctx, e.out, tp, cfg.AMQP, *amqpOnly)
	}
}

func dial(cfg config.AMQP) (*amqp.Connection, error) {
	conn, _, err := messaging.DialFirst(cfg.URLs, 0, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second), Properties: amqp.Table{"connection_name": "islectl"}})
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ: %w", err)
	}
	return conn, nil
}

func verify(ctx context.Context, out io.Writer, tp *topology.Topology, cfg config.AMQP, amqpOnly bool) error {
	var diffs []topology.Difference
	method := "management API"
	if !amqpOnly {
		admin, err := rabbitadmin.New(cfg.ManagementURL, cfg.VHost)
		if err != nil {
			return err
		}
		live, err := admin.Snapshot(ctx)
		if err != nil {
			fmt.Fprintf(out, "warning: %v\nwarning: checking over AMQP only; bindings are not checked\n", err)
			amqpOnly = true
		} else {
			diffs = tp.Compare(live)
		}
	}
	if amqpOnly {
		method = "AMQP (bindings not checked)"
		conn, err := dial(cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		if diffs, err = tp.Probe(conn); err != nil {
			return err
		}
	}
	breaking := 0 // every difference but an Extra object fails the check
	for _, d := range diffs {
		fmt.Fprintln(out, d)
		if d.Severity != topology.Extra {
			breaking++
		}
	}
	if breaking > 0 {
		return fmt.Errorf("topology %q differs from the broker in %d place(s); `islectl topology apply` creates what is missing, a queue with other arguments must be deleted and re-applied", tp.Prefix(), breaking)
	}
	fmt.Fprintf(out, "topology %q matches the broker: %d exchanges, %d queues (checked through the %s)\n",
		tp.Prefix(), len(tp.Exchanges()), len(tp.Queues()), method)
	return nil
}

func showTable(w io.Writer, tp *topology.Topology) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	for _, d := range tp.Domains() {
		retry := "no retry, no DLQ (fire-and-forget)"
		if d.HasRetry() {
			retry = fmt.Sprintf("max %d retries, %s apart, header %s, dead messages in %s",
				d.Retry.MaxRetries, d.Retry.Delay, d.RetryHeader, d.DLQTable)
		}
		fmt.Fprintf(tw, "%s: %s; %s\n", d.Name, d.Message, retry)
		fmt.Fprintf(tw, "  exchange\t%s\t(direct, durable)\n", d.Exchange)
		for _, q := range tp.Queues() {
			if q.Domain != d.Name {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\tkey %s\t%s\n", q.Role, q.Name, q.RoutingKey, formatArgs(q.Args))
		}
		fmt.Fprintf(tw, "  __TypeId__\t%s\n\n", d.TypeID)
	}
}

func formatArgs(args map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(args)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, args[k]))
	}
	return strings.Join(parts, " ")
}

func showJSON(w io.Writer, tp *topology.Topology) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Prefix    string            `json:"prefix"`
		Exchanges []string          `json:"exchanges"`
		Domains   []topology.Domain `json:"domains"`
		Queues    []topology.Queue  `json:"queues"`
	}{tp.Prefix(), tp.Exchanges(), tp.Domains(), tp.Queues()})
}
