package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	amqp "github.com/rabbitmq/amqp091-go"
)

// runQueues prints depth and consumers of every queue of the topology,
// read over AMQP (passive declares), so it works without the management API.
func runQueues(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("queues", flag.ContinueOnError)
	fs.SetOutput(e.out)
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	cfg, tp, err := load(e)
	if err != nil {
		return err
	}
	conn, err := dial(cfg.AMQP)
	if err != nil {
		return err
	}
	defer conn.Close()
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "QUEUE\tDOMAIN\tROLE\tMESSAGES\tCONSUMERS\t")
	var ch *amqp.Channel
	for _, q := range tp.Queues() {
		if ch == nil || ch.IsClosed() {
			if ch, err = conn.Channel(); err != nil {
				return err
			}
		}
		info, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
		if err != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\tmissing\t-\t\n", q.Name, q.Domain, q.Role)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t\n", q.Name, q.Domain, q.Role, info.Messages, info.Consumers)
	}
	return ctx.Err()
}
