package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
)

// summarize prints what the run sent, what the API accepted and what took
// effect, domain by domain, then balances, leaderboards, dead messages,
// queues and where the mails are.
func (d *demo) summarize(ctx context.Context, out io.Writer, fx effects) error {
	created := 0
	for _, u := range d.users {
		if u.Created {
			created++
		}
	}
	settled := "everything took effect by its end"
	switch {
	case !fx.complete():
		settled = fmt.Sprintf("not everything took effect %s after it", d.flags.wait)
	case fx.At.Sub(d.trafficEnd) >= 500*time.Millisecond:
		settled = fmt.Sprintf("everything took effect %s after it", fx.At.Sub(d.trafficEnd).Round(100*time.Millisecond))
	}
	fmt.Fprintf(out, "\nIsle demo %s against %s: %d users (%s..%s; %d created, %d reused), %s of traffic; %s\n\n",
		d.run, d.api.base, len(d.users), d.users[0].Name, d.users[len(d.users)-1].Name, created, len(d.users)-created,
		d.trafficTook.Round(100*time.Millisecond), settled)
	d.printDomains(out, fx)
	if err := d.printBalances(ctx, out); err != nil {
		fmt.Fprintf(out, "balances: %v\n", err)
	}
	d.printBoards(ctx, out)
	if err := d.printDeadMessages(ctx, out); err != nil {
		fmt.Fprintf(out, "dead messages: %v\n", err)
	}
	printQueues(out, fx)
	d.printMails(out, fx)
	if !fx.complete() {
		_, waiting := fx.progress()
		fmt.Fprintf(out, "\nNOT everything took effect within -wait %s (%s): the fleet's logs say why (scripts/up: var/log/worker.log, var/log/relay.log)\n",
			d.flags.wait, waiting)
	}
	for _, e := range fx.Errs {
		fmt.Fprintf(out, "read-back error: %s\n", e)
	}
	return nil
}

func (d *demo) printDomains(out io.Writer, fx effects) {
	d.mu.Lock()
	replays, codes, bt := d.replays, len(d.codesTo), d.batches
	d.mu.Unlock()
	orders := fmt.Sprintf("%d pro months paid: %d users' pro_expire_at extended", fx.ProMonths, fx.ProGranted)
	callbacks := fmt.Sprintf("%d of %d orders PAID; %d RECHARGE rows, %s fen; %d receipts sent",
		fx.OrdersPaid, fx.OrdersWanted, fx.Recharges, fx.RechargedFen.StringFixed(2), fx.ReceiptsSent)
	if fx.Leftovers > 0 {
		callbacks += fmt.Sprintf(" (%d of the orders left unpaid by an earlier run)", fx.Leftovers)
	}
	if d.noPay != "" {
		orders, callbacks = "skipped: no test gateway keys (see below)", "skipped"
	}
	rows := []struct{ kind, name, effect string }{
		{"usage", "agent usage", fmt.Sprintf("%d of %d charges in agent_ledger (DEDUCT), %d of %d counted in agent_usage_event (%d of the charges sent in batches); "+
			"%d client retries answered as replays, deducting nothing", fx.DeductRows, fx.DeductWanted, fx.UsageEvents, fx.UsageAll, bt.Charged, replays)},
		{"usage batches", "agent usage batches", fmt.Sprintf("%d items: %d charged, %d charges sent alone before and again in a batch answered as replays, %d refused",
			bt.Items, bt.Charged, bt.Replays, bt.refused())},
		{"email codes", "email codes", fmt.Sprintf("%d of %d codes mailed", fx.Mails.Codes, codes)},
		{"payment orders", "payment orders", orders},
		{"payment callbacks", "payment callbacks", callbacks},
		{"identity", "identity results", fmt.Sprintf("%d of %d passes with their material stored", fx.Identities, fx.IdentityAll)},
		{"objects", "uploads", fmt.Sprintf("%d of %d replicated (replication=done)%s", fx.Replicated, fx.ObjectsAll, otherStates(fx.ObjectStates))},
		{"game sessions", "game sessions", ""},
		{"scores", "game scores", fmt.Sprintf("%d of %d player bests in mini_game_score", fx.BestsStored, fx.BestsAll)},
		{"leaderboard", "leaderboard reads", ""},
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DOMAIN\tSENT\tACCEPTED\tLIMITED\tREFUSED\tFAILED\tTOOK EFFECT")
	for _, r := range rows {
		t := d.api.tally(r.kind)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.name, t.Sent, t.Accepted, t.Limited, t.Refused, t.Failed, r.effect)
	}
	tw.Flush()
	for _, r := range rows {
		t := d.api.tally(r.kind)
		for _, why := range t.reasons() {
			fmt.Fprintf(out, "  %s: %s\n", r.name, why)
		}
		if t.RetryAfter > 0 {
			fmt.Fprintf(out, "  %s: the limits let them through again within %s (Retry-After)\n", r.name, waitText(t.RetryAfter))
		}
	}
	for _, why := range (tally{Why: bt.Refused}).reasons() {
		fmt.Fprintf(out, "  agent usage batches: items refused: %s\n", why)
	}
	if bt.Unread > 0 {
		fmt.Fprintf(out, "  agent usage batches: %d answers were not one result an item\n", bt.Unread)
	}
	fmt.Fprintf(out, "  email codes: the API allows 3 an hour per client IP, and all of the demo's requests come from one, so it asks for %d "+
		"(-codes N asks for more, claiming other addresses in X-Forwarded-For, which only an API with API_TRUSTED_PROXIES=127.0.0.1 believes)\n", d.flags.codes)
	if d.api.tally("objects").Limited > 0 {
		fmt.Fprintln(out, "  uploads: the API allows 3 avatars an hour per client IP and 5 wallpapers an hour per user; a run within the hour of another meets them")
	}
	if d.noPay != "" {
		fmt.Fprintf(out, "  payments skipped: %s\n", d.noPay)
	}
	fmt.Fprintln(out)
}

// waitText is a wait as a reader wants it: seconds under a minute,
// minutes above.
func waitText(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	}
	return fmt.Sprintf("%d min", int(d.Round(time.Minute).Minutes()))
}

func otherStates(states map[string]int) string {
	var parts []string
	for s, n := range states {
		if s != "done" {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// printBalances shows each user's balance before and after, the ledger
// rows written since the run began, and the hot balance the API answers.
func (d *demo) printBalances(ctx context.Context, out io.Writer) error {
	moved, err := store.NewLedger(d.db).MovedSince(ctx, d.ledgerMark, d.userNames())
	if err != nil {
		return err
	}
	accounts, err := store.NewAccounts(d.db).List(ctx, d.userNames())
	if err != nil {
		return err
	}
	after := map[string]store.UserAccount{}
	for _, a := range accounts {
		after[a.Username] = a
	}
	fmt.Fprintln(out, "balances (fen): MySQL before and after, the agent_ledger rows written meanwhile, the hot balance (Redis) the API answers")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "USER\tBEFORE\tRECHARGED\tCHARGED\tAFTER\tBEFORE+LEDGER=AFTER\tHOT\tHOT=AFTER\tPRO UNTIL\t")
	for _, u := range d.users {
		var recharged, charged, other decimal.Decimal
		for _, m := range moved {
			switch {
			case m.Username != u.Name:
			case m.Kind == store.LedgerRecharge:
				recharged = recharged.Add(m.Fen)
			case m.Kind == store.LedgerDeduct:
				charged = charged.Add(m.Fen)
			default:
				other = other.Add(m.Fen)
			}
		}
		acc := after[u.Name]
		check := "yes"
		if diff := acc.BalanceFen.Sub(u.Before.Add(recharged).Add(charged).Add(other)); !diff.IsZero() {
			check = "off by " + diff.StringFixed(2)
		}
		hot, same := "?", "?"
		var answer struct{ BalanceFen, PendingFen decimal.Decimal }
		if a := d.api.send(ctx, apiCall{method: http.MethodGet, path: "/v1/agent/balance", token: u.Token}); a.Status == http.StatusOK && a.decode(&answer) == nil {
			hot = answer.BalanceFen.StringFixed(2)
			switch {
			case answer.BalanceFen.Equal(acc.BalanceFen):
				same = "yes"
			case !answer.PendingFen.IsZero():
				same = "no: " + answer.PendingFen.StringFixed(2) + " pending"
			default:
				same = "no"
			}
		}
		pro := "-"
		if acc.ProExpireAt != nil {
			pro = acc.ProExpireAt.In(time.Local).Format("2006-01-02")
		}
		fmt.Fprintf(tw, "%s\t%s\t+%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", u.Name, u.Before.StringFixed(2), recharged.StringFixed(2),
			charged.StringFixed(2), acc.BalanceFen.StringFixed(2), check, hot, same, pro)
	}
	tw.Flush()
	fmt.Fprintln(out)
	return nil
}

// printBoards reads each game's top 5 through the API.
func (d *demo) printBoards(ctx context.Context, out io.Writer) {
	for _, game := range demoGames {
		var board struct {
			Entries []store.LeaderboardEntry `json:"entries"`
		}
		a := d.api.send(ctx, apiCall{method: http.MethodGet, path: "/v1/games/" + game + "/leaderboard?limit=5", token: d.users[0].Token})
		if a.Status != http.StatusOK || a.decode(&board) != nil {
			fmt.Fprintf(out, "leaderboard %s: %s\n", game, a.reason())
			continue
		}
		fmt.Fprintf(out, "leaderboard %s, top 5 (GET /v1/games/%s/leaderboard):", game, game)
		if len(board.Entries) == 0 {
			fmt.Fprint(out, " empty")
		}
		fmt.Fprintln(out)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, e := range board.Entries {
			name := e.Username
			if name == "" {
				name = fmt.Sprintf("user %d", e.UserID)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%d moves in %.1f s\n", e.Rank, name, e.Score, e.Moves, float64(e.DurationMs)/1000)
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
}

// printDeadMessages counts each DLQ table's rows, those dead since the run
// began, and shows the newest one's error.
func (d *demo) printDeadMessages(ctx context.Context, out io.Writer) error {
	fmt.Fprintln(out, "dead messages (MySQL, stored by the DLQ consumers; islectl dlq list shows them):")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TABLE\tROWS\tSINCE THE DEMO BEGAN\tNEWEST LAST_ERROR")
	seen := map[string]bool{}
	dead := store.NewDeadLetters(d.db)
	for _, dom := range d.tp.Domains() {
		if dom.DLQTable == "" || seen[dom.DLQTable] {
			continue
		}
		seen[dom.DLQTable] = true
		all, err := dead.Count(ctx, dom.DLQTable, store.DeadLetterFilter{})
		if err != nil {
			return err
		}
		recent, err := dead.Count(ctx, dom.DLQTable, store.DeadLetterFilter{Since: d.began.Add(-time.Second).UTC()})
		if err != nil {
			return err
		}
		last := "-"
		if all > 0 {
			rows, err := dead.List(ctx, dom.DLQTable, store.DeadLetterFilter{Limit: 1, NewestFirst: true, SizesOnly: true})
			if err != nil {
				return err
			}
			last = "(none)"
			if len(rows) > 0 && rows[0].LastError != nil {
				last = clipText(strings.Join(strings.Fields(*rows[0].LastError), " "), 100)
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", dom.DLQTable, all, recent, last)
	}
	tw.Flush()
	fmt.Fprintln(out)
	return nil
}

func printQueues(out io.Writer, fx effects) {
	switch {
	case fx.QueueErr != nil:
		fmt.Fprintf(out, "queues: not read (%v)\n", fx.QueueErr)
	case len(fx.Queued) == 0:
		fmt.Fprintln(out, "queues: all empty")
	default:
		var parts []string
		for _, q := range fx.Queued {
			parts = append(parts, fmt.Sprintf("%s (%s) %d", q.Name, q.Role, q.Messages))
		}
		fmt.Fprintf(out, "queues holding messages: %s\n", strings.Join(parts, ", "))
	}
}

func (d *demo) printMails(out io.Writer, fx effects) {
	m := fx.Mails
	fmt.Fprintf(out, "mails: %d of %d expected (%d codes, %d receipts)", m.total(), fx.MailsWanted, m.Codes, m.Receipts)
	switch {
	case m.Mailpit != "" && (m.InMailpit > 0 || m.total() == 0):
		fmt.Fprintf(out, " in Mailpit: open %s\n", m.Mailpit)
		if m.total() > m.InMailpit {
			fmt.Fprintf(out, "       and %d as .eml files in %s\n", m.total()-m.InMailpit, m.Dir)
		}
	case m.Mailpit != "":
		fmt.Fprintf(out, " as .eml files in %s (Mailpit at %s has none of them)\n", m.Dir, m.Mailpit)
	default:
		fmt.Fprintf(out, " as .eml files in %s (no Mailpit answers at %s)\n", m.Dir, d.flags.mailpit)
	}
}
