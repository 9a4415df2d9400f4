package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The worker names each mail by its idempotency key (doc/mail.md): the
// file <key>.eml of the directory mailer, the Message-ID <key@domain> over
// SMTP. A code's key is code-<digest>, a receipt's receipt-<outTradeNo>.
const (
	codeMailPrefix    = "code-"
	receiptMailPrefix = "receipt-"
)

// mailCount is the run's mails found: in Mailpit, where scripts/up sends
// them unless ISLE_NO_MAILPIT=1, and in the mail directory, where it
// writes them otherwise.
type mailCount struct {
	Codes, Receipts int
	InMailpit       int    // of which found in Mailpit
	Mailpit         string // its UI when it answers, else ""
	Dir             string // the mail directory, absolute
}

func (m mailCount) total() int { return m.Codes + m.Receipts }

// countMails counts the codes mailed to the demo's addresses since the run
// began and the receipts of orders, in Mailpit and in the directory.
func (d *demo) countMails(ctx context.Context, orders []string) mailCount {
	var m mailCount
	m.Dir, _ = filepath.Abs(d.flags.mailDir)
	since := d.began.Add(-time.Second)
	addrs := make([]string, len(d.users))
	for i, u := range d.users {
		addrs[i] = strings.ToLower(u.Email)
	}
	isReceipt := func(key string) bool {
		no, ok := strings.CutPrefix(key, receiptMailPrefix)
		return ok && slices.Contains(orders, no)
	}
	count := func(key string, to []string, at time.Time) {
		switch {
		case isReceipt(key):
			m.Receipts++
		case strings.HasPrefix(key, codeMailPrefix) && !at.Before(since) && slices.ContainsFunc(to, func(a string) bool {
			return slices.Contains(addrs, strings.ToLower(a))
		}):
			m.Codes++
		}
	}
	if d.mailpitUp(ctx) {
		m.Mailpit = strings.TrimRight(d.flags.mailpit, "/")
		for _, msg := range d.mailpitMessages(ctx) {
			before := m.total()
			var to []string
			for _, a := range msg.To {
				to = append(to, a.Address)
			}
			key, _, _ := strings.Cut(msg.MessageID, "@")
			count(key, to, msg.Created)
			m.InMailpit += m.total() - before
		}
	}
	files, _ := filepath.Glob(filepath.Join(m.Dir, "*.eml"))
	for _, f := range files {
		key := strings.TrimSuffix(filepath.Base(f), ".eml")
		fi, err := os.Stat(f)
		if err != nil || !isReceipt(key) && !strings.HasPrefix(key, codeMailPrefix) {
			continue
		}
		count(key, mailTo(f), fi.ModTime())
	}
	return m
}

// mailTo is the addresses of an .eml file's To header.
func mailTo(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	msg, err := mail.ReadMessage(f)
	if err != nil {
		return nil
	}
	list, err := msg.Header.AddressList("To")
	if err != nil {
		return nil
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Address
	}
	return out
}

// mailpitUp reports whether Mailpit answers at -mailpit.
func (d *demo) mailpitUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, path := range []string{"/readyz", "/api/v1/info"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(d.flags.mailpit, "/")+path, nil)
		if err != nil {
			return false
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
	}
	return false
}

// mailpitMessage is a message of Mailpit's list (GET /api/v1/messages).
type mailpitMessage struct {
	MessageID string
	To        []struct{ Address string }
	Created   time.Time
}

// mailpitMessages lists Mailpit's newest messages.
func (d *demo) mailpitMessages(ctx context.Context) []mailpitMessage {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(d.flags.mailpit, "/")+"/api/v1/messages?limit=1000", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct{ Messages []mailpitMessage }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list) != nil {
		return nil
	}
	return list.Messages
}
