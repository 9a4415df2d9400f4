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
	goalEndToEnd   = 0.085 // usage end to end ÷ raw RabbitMQ end to end
	goalBatched    = 0.16  // batched usage end to end ÷ raw RabbitMQ end to end
	goalBatchP99   = 150.0 // ms, a batch's answer at BatchInFlightDefault in flight
	goalP99At32    = 40.0  // ms, usage API at 32 in flight
	goalConsumer   = 0.25  // deduct consumer alone ÷ bare consumer
	goalAPICPU     = 0.2   // ms of api CPU per request, end to end
	goalWorkerCPU  = 0.13  // ms of worker CPU per request, end to end
	goalPeakRSSMiB = 60    // api's and worker's peak RSS at the end-to-end load
	goalTracing    = 0.97  // usage end to end sampled as compose and Kubernetes sample ÷ exporting none
	goalRunSeconds = 300
)

func targets(rep *Report) []Target {
	var out []Target
	add := func(name string, v float64, goal string, met bool) {
		out = append(out, Target{Name: name, Value: v, Goal: goal, Met: met})
	}
	atMost := func(name string, v, goal float64, format string) {
		add(name, v, "≤ "+fmt.Sprintf(format, goal), v <= goal)
	}
	atLeast := func(name string, v, goal float64) { add(name, v, fmt.Sprintf("≥ %.3g", goal), v >= goal) }
	if rep.EndToEnd.RatioToRaw > 0 {
		atLeast("usage end to end ÷ raw RabbitMQ end to end", rep.EndToEnd.RatioToRaw, goalEndToEnd)
	}
	// The batch goals are the default batch's, at the default in flight.
	if b := rep.Batched; b.Charges > 0 && b.Size == BatchSizeDefault && b.InFlight == BatchInFlightDefault {
		if b.RatioToRaw > 0 {
			atLeast("batched usage end to end ÷ raw RabbitMQ end to end", b.RatioToRaw, goalBatched)
		}
		atMost(fmt.Sprintf("batch p99 at %d in flight, %d a batch (ms)", b.InFlight, b.Size), b.P99ms, goalBatchP99, "%.0f")
	}
	for _, l := range rep.Usage {
		if l.Mode == "closed" && l.InFlight == 32 {
			atMost("usage API p99 at 32 in flight (ms)", l.P99ms, goalP99At32, "%.0f")
		}
	}
	if rep.Consumer.RatioToBare > 0 {
		atLeast("deduct consumer alone ÷ bare consumer (an ack each, as doc/money.md)", rep.Consumer.RatioToBare, goalConsumer)
	}
	for _, c := range rep.EndToEnd.CPU {
		switch c.Process {
		case "api":
			atMost("api CPU per request, end to end (ms)", c.MsPerRequest, goalAPICPU, "%.1f")
		case "worker":
			atMost("worker CPU per request, end to end (ms)", c.MsPerRequest, goalWorkerCPU, "%.2f")
		}
	}
	for _, c := range rep.EndToEnd.CPU {
		if c.Process == "api" || c.Process == "worker" {
			atMost(c.Process+" peak RSS, end to end (MiB)", float64(c.PeakRSSBytes)/(1<<20), goalPeakRSSMiB, "%.0f")
		}
	}
	if rep.Tracing.SampledRatio > 0 {
		atLeast(fmt.Sprintf("usage end to end, sampling %g ÷ exporting none", rep.Tracing.SampleRatio), rep.Tracing.SampledRatio, goalTracing)
	}
	for _, l := range rep.Relay.Lag {
		if l.Default { // the other interval is a comparison, not a goal
			atMost(relayLagName(l), l.P99ms, goalRelayLagP99, "%.0f")
		}
	}
	add("bench run (s)", rep.Seconds, fmt.Sprintf("< %d", goalRunSeconds), rep.Seconds < goalRunSeconds)
	return out
}

// WriteTable prints the report as tables: each Isle figure beside its
// baseline, the CPU per request of each process, and the goals. A run of
// some phases (-phases) prints the figures it measured.
func WriteTable(w io.Writer, rep *Report) error {
	fmt.Fprintf(w, "Isle bench: %s, %d CPUs, %s, fleet %s, took %s\n\n", rep.Started.Format(time.RFC3339), rep.CPUs, rep.GoVersion,
		rep.Fleet, (time.Duration(rep.Seconds * float64(time.Second))).Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tIsle\tbaseline\tratio")
	fmt.Fprintln(tw, "------\t----\t--------\t-----")
	writeBaselineRows(tw, rep.Baselines)
	for _, l := range rep.Usage {
		what := fmt.Sprintf("usage API, %d in flight", l.InFlight)
		if l.Mode == "rate" {
			what = fmt.Sprintf("usage API, fixed rate %s/s", num(l.TargetRPS))
		}
		fmt.Fprintf(tw, "%s\t%s req/s; p50 %.1f, p99 %.1f, p99.9 %.1f ms%s\t\t\n", what, num(l.RPS), l.P50ms, l.P99ms, l.P999ms, errorsNote(l.Errors))
	}
	writeEndToEndRows(tw, rep)
	writeConsumerRows(tw, rep)
	writeRelayRows(tw, rep)
	if sc := rep.Scores; sc.Skipped != "" {
		fmt.Fprintf(tw, "score submissions end to end\tskipped: %s\t\t\n", sc.Skipped)
	} else if sc.Requests > 0 {
		fmt.Fprintf(tw, "score submissions end to end, %d in flight (API to each best in MySQL and the leaderboard)\t%s req/s; p99 %.1f ms%s\t",
			sc.InFlight, num(sc.PerSecond), sc.P99ms, errorsNote(sc.Errors))
		writeYardsticks(tw, rep.Baselines, sc.RatioToRaw, sc.RatioToLimit)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	e, bt := rep.EndToEnd, rep.Batched
	if err := writeCPU(w, fmt.Sprintf("CPU during the end-to-end phase (%s requests; until every message was handled)", num(float64(e.Requests))), "request", e.CPU); err != nil {
		return err
	}
	if err := writeCPU(w, fmt.Sprintf("CPU during the batch phase (%s charges in %s batches of %d; until every message was handled)",
		num(float64(bt.Charges)), num(float64(bt.Batches)), bt.Size), "charge", bt.CPU); err != nil {
		return err
	}
	if c := rep.Consumer; c.Skipped == "" && c.Messages > 0 {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "deduct consumer alone: worker %.3f ms CPU per message, peak RSS %d MiB\n", c.WorkerCPUms, c.WorkerPeakRSS>>20)
		if wa := c.WatermillAMQP; wa != nil && wa.Messages > 0 {
			fmt.Fprintf(w, "deduct consumer alone on watermill-amqp: worker %.3f ms CPU per message, peak RSS %d MiB\n", wa.WorkerCPUms, wa.WorkerPeakRSS>>20)
		}
	}
	if err := writeRelayCPU(w, &rep.Relay); err != nil {
		return err
	}
	return writeTargets(w, rep.Targets)
}

// writeBaselineRows prints the raw baselines the run measured, and the
// composite limit of a charge made of them.
func writeBaselineRows(tw io.Writer, b Baselines) {
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
	if l := b.Limit; l.PerSecond > 0 {
		fmt.Fprintf(tw, "composite limit of a charge: 2 messages at raw end to end + 1 deduct.lua + 2 rows in %d-row INSERTs\t\t%s charges/s (%.1f + %.1f + %.1f = %.1f µs)\t\n",
			mysqlBatchRows, num(l.PerSecond), l.MessagesUs, l.DeductUs, l.RowsUs, l.UsPerCharge)
	}
}

// writeYardsticks ends an end-to-end figure's row with its ratio to raw
// RabbitMQ end to end, and adds a row with its ratio to the composite
// limit of a charge, for the baselines the run measured.
func writeYardsticks(tw io.Writer, b Baselines, toRaw, toLimit float64) {
	if b.RawEndToEnd.PerSecond <= 0 {
		fmt.Fprint(tw, "\t\n") // the baselines did not run (-phases)
		return
	}
	fmt.Fprintf(tw, "%s msg/s raw end to end\t%.3f\n", num(b.RawEndToEnd.PerSecond), toRaw)
	if b.Limit.PerSecond > 0 {
		fmt.Fprintf(tw, "\t\t%s charges/s composite limit\t%.3f\n", num(b.Limit.PerSecond), toLimit)
	}
}

// writeEndToEndRows prints the end-to-end figures of the usage path: one
// request a charge, in batches, and with every span exported.
func writeEndToEndRows(tw io.Writer, rep *Report) {
	b := rep.Baselines
	if e := rep.EndToEnd; e.Requests > 0 {
		fmt.Fprintf(tw, "usage end to end, %d in flight (first request to last ledger row)\t%s req/s%s\t", e.InFlight, num(e.PerSecond), errorsNote(e.Errors))
		writeYardsticks(tw, b, e.RatioToRaw, e.RatioToLimit)
	}
	if bt := rep.Batched; bt.Skipped != "" {
		fmt.Fprintf(tw, "batched usage end to end\tskipped: %s\t\t\n", bt.Skipped)
	} else if bt.Charges > 0 {
		fmt.Fprintf(tw, "batched usage end to end, %d a batch, %d in flight (first batch to last ledger row)\t%s charges/s; batch p50 %.1f, p99 %.1f, p99.9 %.1f ms%s\t",
			bt.Size, bt.InFlight, num(bt.PerSecond), bt.P50ms, bt.P99ms, bt.P999ms, errorsNote(bt.Errors))
		writeYardsticks(tw, b, bt.RatioToRaw, bt.RatioToLimit)
		if e := rep.EndToEnd; e.PerSecond > 0 {
			fmt.Fprintf(tw, "\t\t%s req/s usage end to end\t%.3f\n", num(e.PerSecond), bt.PerSecond/e.PerSecond)
		}
	}
	writeTracingRow(tw, rep.Tracing, b)
}

// writeConsumerRows prints the deduct consumer alone beside the bare one.
func writeConsumerRows(tw io.Writer, rep *Report) {
	b, c := rep.Baselines, rep.Consumer
	if c.Skipped != "" {
		fmt.Fprintf(tw, "deduct consumer alone\tskipped: %s\t\t\n", c.Skipped)
		return
	}
	if c.Messages == 0 {
		return
	}
	fmt.Fprintf(tw, "deduct consumer alone (worker -handlers agent-billing)\t%s msg/s\t%s msg/s bare consumer, an ack each\t%.3f\n",
		num(c.PerSecond), num(b.BareConsumer.PerSecond), c.RatioToBare)
	fmt.Fprintf(tw, "\t\t%s msg/s bare consumer, multi-ack\t%.3f\n", num(b.BareConsumerMultiAck.PerSecond), c.RatioToMulti)
	if wa := c.WatermillAMQP; wa != nil && wa.Messages > 0 {
		fmt.Fprintf(tw, "deduct consumer alone, WORKER_SUBSCRIBER=watermill-amqp (%s deductions: a quarter)\t%s msg/s\t%s msg/s bare consumer, an ack each\t%.3f\n",
			num(float64(wa.Queued)), num(wa.PerSecond), num(b.BareConsumer.PerSecond), wa.RatioToBare)
		fmt.Fprintf(tw, "\t\t%s msg/s on Isle's subscriber\t%.3f\n", num(c.PerSecond), wa.RatioToIsle)
	}
}

// writeCPU prints what each process spent during a phase, per request
// (what names it); nothing when the phase did not run.
func writeCPU(w io.Writer, title, what string, cpu []ProcessCPU) error {
	if len(cpu) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "process\tcores\tms CPU per %s\tRSS MiB\tpeak RSS MiB\t\n", what)
	var sum float64
	var lifetime []string
	for _, p := range cpu {
		fmt.Fprintf(tw, "%s\t%.2f\t%.3f\t%d\t%d\t\n", p.Process, p.Cores, p.MsPerRequest, p.RSSBytes>>20, p.PeakRSSBytes>>20)
		sum += p.MsPerRequest
		if !p.PeakOfPhase {
			lifetime = append(lifetime, p.Process)
		}
	}
	fmt.Fprintf(tw, "all\t\t%.3f\t\t\t\n", sum)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(lifetime) > 0 {
		fmt.Fprintf(w, "(peak RSS: during the phase; of %s since it started, as the bench may not reset another user's)\n", strings.Join(lifetime, ", "))
	}
	return nil
}

// writeTargets prints the goals and whether this run met them.
func writeTargets(w io.Writer, targets []Target) error {
	fmt.Fprintln(w, "\nGoals, on this run's figures")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range targets {
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

// writeTracingRow prints the tracing phase's rows, if it ran: exporting
// every span against exporting none, and each against the yardsticks.
func writeTracingRow(tw io.Writer, tr Tracing, b Baselines) {
	if tr.Skipped != "" {
		fmt.Fprintf(tw, "usage end to end, every span exported\tskipped: %s\t\t\n", tr.Skipped)
		return
	}
	if tr.Ratio <= 0 {
		return
	}
	if tr.SampledRatio > 0 {
		fmt.Fprintf(tw, "usage end to end, sampled over OTLP (parentbased_traceidratio %g)\t%s req/s\t%s req/s exporting none\t%.3f\n",
			tr.SampleRatio, num(tr.SampledPerSecond), num(tr.OffPerSecond), tr.SampledRatio)
	}
	fmt.Fprintf(tw, "usage end to end, every span exported over OTLP\t%s req/s\t%s req/s exporting none\t%.3f\n",
		num(tr.OnPerSecond), num(tr.OffPerSecond), tr.Ratio)
	if b.RawEndToEnd.PerSecond > 0 {
		fmt.Fprintf(tw, "\t\t%s msg/s raw end to end\t%.3f (exporting none %.3f)\n", num(b.RawEndToEnd.PerSecond), tr.OnRatioToRaw, tr.OffRatioToRaw)
	}
	if b.Limit.PerSecond > 0 {
		fmt.Fprintf(tw, "\t\t%s charges/s composite limit\t%.3f (exporting none %.3f)\n", num(b.Limit.PerSecond), tr.OnRatioToLimit, tr.OffRatioToLimit)
	}
}
