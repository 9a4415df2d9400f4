package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/store"
)

// runPay is local development's payment gateway: test keys the API can be
// configured to trust, and callbacks signed with them (doc/payments.md,
// "Simulating a callback").
func runPay(ctx context.Context, e env, args []string) error {
	sub, rest, err := subcommand(args, "keys", "simulate")
	if err != nil {
		return err
	}
	if sub == "keys" {
		return runPayKeys(e, rest)
	}
	return runPaySimulate(ctx, e, rest)
}

// runPayKeys writes new local test keys, refusing to replace keys unless
// told to.
func runPayKeys(e env, args []string) error {
	fs := flag.NewFlagSet("pay keys", flag.ContinueOnError)
	fs.SetOutput(e.out)
	dir := fs.String("dir", payKeysDirDefault, "the directory to write the keys to (made 0700)")
	force := fs.Bool("force", false, "replace keys already in -dir")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("pay keys [-dir DIR] [-force]")
	}
	present, err := payKeysPresent(*dir)
	if err != nil {
		return err
	}
	if len(present) > 0 && !*force {
		return fmt.Errorf("%s already holds keys (%s): -force replaces them (an API started with the old ones trusts only those until restarted)",
			*dir, strings.Join(present, ", "))
	}
	k, err := paynotify.GenerateTestKeys()
	if err != nil {
		return err
	}
	if err := writePayKeys(*dir, k); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "wrote local TEST payment gateway keys to %s (never use them in production):\n", *dir)
	for _, name := range append(payKeyNames(), payEnvFile) {
		fmt.Fprintf(e.out, "  %s\n", filepath.Join(*dir, name))
	}
	fmt.Fprintf(e.out, "configure the API with them: . %s, and ISLE_DEV=1, without which the API refuses test keys (scripts/up does both)\n",
		filepath.Join(*dir, payEnvFile))
	return nil
}

// runPaySimulate posts a gateway callback for an order, signed with the
// test keys, and fails unless the API accepted it.
func runPaySimulate(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("pay simulate", flag.ContinueOnError)
	fs.SetOutput(e.out)
	orderNo := fs.String("order", "", "the order's out_trade_no (required)")
	channel := fs.String("channel", "", "alipay or wechat (default: the order's channel)")
	amount := fs.Int64("amount", 0, "the amount paid, in fen (default: the order's amount_fen)")
	state := fs.String("state", paynotify.StateSuccess, "SUCCESS, CLOSED, NOTPAY, ... or the gateway's own (TRADE_SUCCESS, REFUND, ...)")
	api := fs.String("api", "", "the API's base URL (default: API_ADDR's, http://127.0.0.1:8080)")
	dir := fs.String("dir", payKeysDirDefault, "the test keys, written by islectl pay keys")
	notifyID := fs.String("notify-id", "", "the callback's id (Alipay notify_id, WeChat id); the same id replays a callback (default: a new one)")
	txID := fs.String("transaction-id", "", "the gateway's trade id (Alipay trade_no, WeChat transaction_id) (default: a new one)")
	force := fs.Bool("force", false, "send even when -channel is not the order's channel (the API refuses it)")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 || *orderNo == "" {
		return usagef("pay simulate -order OUT_TRADE_NO [-channel alipay|wechat] [-amount FEN] [-state SUCCESS|CLOSED|...] [-api URL] [-dir DIR]")
	}
	if *amount < 0 {
		return usagef("-amount %d: want fen, more than 0", *amount)
	}
	ch := strings.ToUpper(*channel)
	if ch != "" && ch != paynotify.ChannelAlipay && ch != paynotify.ChannelWechat {
		return usagef("-channel %q: want alipay or wechat", *channel)
	}
	keys, err := loadPayKeys(*dir)
	if err != nil {
		return err
	}
	cfg, _, db, err := openDB(e)
	if err != nil {
		return err
	}
	defer store.CloseMySQL(db)
	order, err := store.NewOrders(db, nil).Get(ctx, *orderNo)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no order %s in the database MYSQL_DSN names: create one with POST /v1/payments/orders", *orderNo)
	}
	if err != nil {
		return err
	}
	switch {
	case ch == "":
		ch = order.Channel
	case ch != order.Channel && !*force:
		return fmt.Errorf("order %s was made for %s, not %s: the API refuses a callback from another channel (-force sends it anyway)",
			order.OutTradeNo, order.Channel, ch)
	}
	p := payment{OutTradeNo: order.OutTradeNo, Subject: order.ProductCode, AmountFen: order.AmountFen,
		NotifyID: *notifyID, TransactionID: *txID, OrderedAt: order.CreatedAt}
	if *amount != 0 {
		p.AmountFen = *amount
	}
	if p.State, err = gatewayState(ch, *state); err != nil {
		return usagef("%v", err)
	}
	base := *api
	if base == "" {
		if base, err = cfg.APIURL(); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.out, "order %s: %s, %d fen, %s, %s\n", order.OutTradeNo, order.Status, order.AmountFen, order.Channel, order.ProductCode)
	if ch != order.Channel || p.AmountFen != order.AmountFen {
		fmt.Fprintln(e.out, "note: the callback differs from the order (channel or amount): the API should refuse it")
	}
	build := alipayCallback
	if ch == paynotify.ChannelWechat {
		build = wechatCallback
	}
	cb, err := build(keys, p, time.Now())
	if err != nil {
		return err
	}
	return postCallback(ctx, e.out, strings.TrimRight(base, "/"), cb)
}

// postCallback sends cb to the API at base, prints the answer and fails
// unless the API accepted the callback.
func postCallback(ctx context.Context, out io.Writer, base string, cb callback) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+cb.Path, bytes.NewReader(cb.Body))
	if err != nil {
		return usagef("-api %q: %v", base, err)
	}
	req.Header = cb.Header.Clone()
	req.Header.Set("User-Agent", "islectl-pay-simulate")
	fmt.Fprintf(out, "POST %s: %s\n", req.URL, cb.Summary)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("post the callback: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	fmt.Fprintf(out, "HTTP %s\n", resp.Status)
	if len(body) > 0 {
		fmt.Fprintf(out, "%s\n", bytes.TrimRight(body, "\n"))
	}
	if !cb.Accepted(resp.StatusCode, body) {
		return fmt.Errorf("the API did not accept the callback (HTTP %d); its log says why", resp.StatusCode)
	}
	return nil
}
