package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The goals doc/performance.md states, checked on each run's own figures.
const (
	goalEndToEnd   = 0.15 // usage end to end ÷ raw RabbitMQ end to end
	goalP99At32    = 50.0 // ms, usage API at 32 in flight
	goalConsumer   = 0.30 // deduct consumer alone ÷ bare consumer
	goalAPICPU     = 0.2  // ms of api CPU per request
	goalTracing    = 0.95 // usage end to end exporting every span ÷ exporting none
	goalRunSeconds = 300
)

func targets(rep *Report) []Target {
	var out []Target
	add := func(name string, v float64, goal string, met bool) {
		out = append(out, Target{Name: name, Value: v, Goal: goal, Met: met})
	}
	if rep.EndToEnd.RatioToRaw > 0 {
		add("usage end to end ÷ raw RabbitMQ end to end", rep.EndToEnd.RatioToRaw, fmt.Sprintf("≥ %.2f", goalEndToEnd), rep.EndToEnd.RatioToRaw >= goalEndToEnd)
	}
	for _, l := range rep.Usage {
		if l.Mode == "closed" && l.InFlight == 32 {
			add("usage API p99 at 32 in flight (ms)", l.P99ms, fmt.Sprintf("≤ %.0f", goalP99At32), l.P99ms <= goalP99At32)
		}
	}
	if rep.Consumer.RatioToBare > 0 {
		add("deduct consumer alone ÷ bare consumer (an ack each, as doc/money.md)", rep.Consumer.RatioToBare, fmt.Sprintf("≥ %.2f", goalConsumer), rep.Consumer.RatioToBare >= goalConsumer)
	}
	for _, c := range rep.EndToEnd.CPU {
		if c.Process == "api" {
			add("api CPU per request (ms)", c.MsPerRequest, fmt.Sprintf("≤ %.1f", goalAPICPU), c.MsPerRequest <= goalAPICPU)
		}
	}
	if rep.Tracing.Ratio > 0 {
		add("usage end to end, every span exported ÷ none", rep.Tracing.Ratio, fmt.Sprintf("≥ %.2f", goalTracing), rep.Tracing.Ratio >= goalTracing)
	}
	for _, l := range rep.Relay.Lag {
		if l.Default { // the other interval is a comparison, not a goal
			add(relayLagName(l), l.P99ms, fmt.Sprintf("≤ %.0f", goalRelayLagP99), l.P99ms <= goalRelayLagP99)
		}
	}
	add("bench run (s)", rep.Seconds, fmt.Sprintf("< %d", goalRunSeconds), rep.Seconds < goalRunSeconds)
	return out
}

// WriteTable prints the report as tables: each Isle figure beside its
// baseline, the CPU per request of each process, and the goals.
func WriteTable(w io.Writer, rep *Report) error {
	b := rep.Baselines
	fmt.Fprintf(w, "Isle bench: %s, %d CPUs, %s, fleet %s, took %s\n\n", rep.Started.Format(time.RFC3339), rep.CPUs, rep.GoVersion,
		rep.Fleet, (time.Duration(rep.Seconds * float64(time.Second))).Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tIsle\tbaseline\tratio")
	fmt.Fprintln(tw, "------\t----\t--------\t-----")
	// A run of some phases (-phases) prints the figures it measured.
	for _, f := range []struct {
		what string
		rate Rate
		unit string
	}{
		{fmt.Sprintf("raw RabbitMQ publish, confirm window %d", rawConfirmWindow), b.RawPublish, "msg/s"},
		{fmt.Sprintf("raw RabbitMQ consume, prefetch %d, multi-ack", rawPrefetch), b.RawConsume, "msg/s"},
		{"raw RabbitMQ end to end (both at once)", b.RawEndToEnd, "msg/s"},
		{fmt.Sprintf("Redis deduct.lua via go-redis, %d goroutines", redisGoroutines), b.RedisDeduct, "calls/s"},
		{fmt.Sprintf("MySQL INSERT, %d rows per statement", mysqlBatchRows), b.MySQLBatch, "rows/s"},
	} {
		if f.rate.PerSecond > 0 {
			fmt.Fprintf(tw, "%s\t\t%s %s\t\n", f.what, num(f.rate.PerSecond), f.unit)
		}
	}
	for _, l := range rep.Usage {
		what := fmt.Sprintf("usage API, %d in flight", l.InFlight)
		if l.Mode == "rate" {
			what = fmt.Sprintf("usage API, fixed rate %s/s", num(l.TargetRPS))
		}
		fmt.Fprintf(tw, "%s\t%s req/s; p50 %.1f, p99 %.1f, p99.9 %.1f ms%s\t\t\n", what, num(l.RPS), l.P50ms, l.P99ms, l.P999ms, errorsNote(l.Errors))
	}
	e := rep.EndToEnd
	if e.Requests > 0 {
		fmt.Fprintf(tw, "usage end to end, %d in flight (first request to last ledger row)\t%s req/s%s\t%s msg/s raw end to end\t%.3f\n",
			e.InFlight, num(e.PerSecond), errorsNote(e.Errors), num(b.RawEndToEnd.PerSecond), e.RatioToRaw)
	}
	writeTracingRow(tw, rep.Tracing)
	c := rep.Consumer
	if c.Skipped != "" {
		fmt.Fprintf(tw, "deduct consumer alone\tskipped: %s\t\t\n", c.Skipped)
	} else if c.Messages > 0 {
		fmt.Fprintf(tw, "deduct consumer alone (worker -handlers agent-billing)\t%s msg/s\t%s msg/s bare consumer, an ack each\t%.3f\n",
			num(c.PerSecond), num(b.BareConsumer.PerSecond), c.RatioToBare)
		fmt.Fprintf(tw, "\t\t%s msg/s bare consumer, multi-ack\t%.3f\n", num(b.BareConsumerMultiAck.PerSecond), c.RatioToMulti)
		if wa := c.WatermillAMQP; wa != nil && wa.Messages > 0 {
			fmt.Fprintf(tw, "deduct consumer alone, WORKER_SUBSCRIBER=watermill-amqp (%s deductions: a quarter)\t%s msg/s\t%s msg/s bare consumer, an ack each\t%.3f\n",
				num(float64(wa.Queued)), num(wa.PerSecond), num(b.BareConsumer.PerSecond), wa.RatioToBare)
			fmt.Fprintf(tw, "\t\t%s msg/s on Isle's subscriber\t%.3f\n", num(c.PerSecond), wa.RatioToIsle)
		}
	}
	writeRelayRows(tw, rep)
	if sc := rep.Scores; sc.Skipped != "" {
		fmt.Fprintf(tw, "score submissions end to end\tskipped: %s\t\t\n", sc.Skipped)
	} else if sc.Requests > 0 {
		fmt.Fprintf(tw, "score submissions end to end, %d in flight (API to each best in MySQL and the leaderboard)\t%s req/s; p99 %.1f ms%s\t%s msg/s raw end to end\t%.3f\n",
			sc.InFlight, num(sc.PerSecond), sc.P99ms, errorsNote(sc.Errors), num(b.RawEndToEnd.PerSecond), sc.RatioToRaw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(e.CPU) > 0 {
		fmt.Fprintf(w, "\nCPU during the end-to-end phase (%s requests; until every message was handled)\n", num(float64(e.Requests)))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "process\tcores\tms CPU per request\tRSS MiB\tpeak RSS MiB\t")
		for _, p := range e.CPU {
			fmt.Fprintf(tw, "%s\t%.2f\t%.3f\t%d\t%d\t\n", p.Process, p.Cores, p.MsPerRequest, p.RSSBytes>>20, p.PeakRSSBytes>>20)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if c.Skipped == "" && c.Messages > 0 {
		if len(e.CPU) == 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "deduct consumer alone: worker %.3f ms CPU per message, peak RSS %d MiB\n", c.WorkerCPUms, c.WorkerPeakRSS>>20)
		if wa := c.WatermillAMQP; wa != nil && wa.Messages > 0 {
			fmt.Fprintf(w, "deduct consumer alone on watermill-amqp: worker %.3f ms CPU per message, peak RSS %d MiB\n", wa.WorkerCPUms, wa.WorkerPeakRSS>>20)
		}
	}
	if err := writeRelayCPU(w, &rep.Relay); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nGoals, on this run's figures")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range rep.Targets {
		met := "met"
		if !t.Met {
			met = "NOT met"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", t.Value), "0"), "."), t.Goal, met)
	}
	return tw.Flush()
}

func errorsNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d errors", n)
}

// num prints a rate with thousands separators and no decimals.
func num(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// intervalText prints a poll interval in milliseconds as a duration ("3s").
func intervalText(msecs float64) string {
	return time.Duration(msecs * float64(time.Millisecond)).String()
}

// relayLagWhat names a lag run: its rate and the relay's interval.
func relayLagWhat(l RelayLag) string {
	which := "interval"
	if l.Default {
		which = "default interval"
	}
	return fmt.Sprintf("%s rows/s, %s %s", num(l.TargetRPS), which, intervalText(l.IntervalMs))
}

func relayLagName(l RelayLag) string {
	return "outbox relay lag p99 at " + relayLagWhat(l) + " (ms)"
}

// writeRelayRows adds the relay phase's rows to the main table, if it ran.
func writeRelayRows(tw io.Writer, rep *Report) {
	rl := rep.Relay
	switch {
	case rl.Skipped != "":
		fmt.Fprintf(tw, "outbox relay\tskipped: %s\t\t\n", rl.Skipped)
		return
	case rl.Drain.Rows == 0:
		return
	}
	d := rl.Drain
	fmt.Fprintf(tw, "outbox relay drain, %s rows, batch %d (claim, publish confirmed, mark)\t%s rows/s\t%s msg/s raw publish, confirm window %d\t%.3f\n",
		num(float64(d.Rows)), d.BatchSize, num(d.PerSecond), num(rep.Baselines.RawPublish.PerSecond), rawConfirmWindow, d.RatioToRawPublish)
	for _, l := range rl.Lag {
		fmt.Fprintf(tw, "outbox relay lag at %s (commit to delivery)\tp50 %.1f, p99 %.1f, p99.9 %.1f, max %.1f ms; %s rows/s inserted\t\t\n",
			relayLagWhat(l), l.P50ms, l.P99ms, l.P999ms, l.MaxMs, num(l.InsertRPS))
	}
}

// writeRelayCPU prints the CPU per row of the relay phase's processes:
// draining the backlog, and in each lag run.
func writeRelayCPU(w io.Writer, rl *Relay) error {
	if len(rl.Drain.CPU) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nCPU during the relay phase, ms per row (the lag runs' bench and MariaDB include inserting each row in its own transaction)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "process\tdrain\t")
	for _, l := range rl.Lag {
		fmt.Fprintf(tw, "lag, interval %s\t", intervalText(l.IntervalMs))
	}
	fmt.Fprintln(tw)
	for _, p := range rl.Drain.CPU {
		fmt.Fprintf(tw, "%s\t%.3f\t", p.Process, p.MsPerRequest)
		for _, l := range rl.Lag {
			v := "-"
			for _, q := range l.CPU {
				if q.Process == p.Process {
					v = fmt.Sprintf("%.3f", q.MsPerRequest)
				}
			}
			fmt.Fprintf(tw, "%s\t", v)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// writeTracingRow prints the tracing phase's row, if it ran.
func writeTracingRow(tw io.Writer, tr Tracing) {
	if tr.Skipped != "" {
		fmt.Fprintf(tw, "usage end to end, every span exported\tskipped: %s\t\t\n", tr.Skipped)
	} else if tr.Ratio > 0 {
		fmt.Fprintf(tw, "usage end to end, every span exported over OTLP\t%s req/s\t%s req/s exporting none\t%.3f\n",
			num(tr.OnPerSecond), num(tr.OffPerSecond), tr.Ratio)
	}
}
