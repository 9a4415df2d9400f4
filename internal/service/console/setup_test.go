package console_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// testBundle is a console over real, isolated services, served by an
// httptest server, and a browser-like client with a cookie jar.
type testBundle struct {
	db      *gorm.DB
	redis   *store.Redis
	tp      *topology.Topology
	conn    *amqp.Connection
	pub     *messaging.Publisher
	console *console.Console
	srv     *httptest.Server
	client  *http.Client
	logs    *storetest.LogBuffer
}

type options struct {
	probes   []console.Probe
	interval time.Duration // the sample interval; default 100 ms, so that each page samples anew
	backends func(*console.Backends)
}

func setup(t *testing.T, o options) *testBundle {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	logs := &storetest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL()}, tp, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { pub.Close() })
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	b := &testBundle{db: storetest.MySQL(t), redis: storetest.Redis(t), tp: tp, conn: conn, pub: pub, logs: logs}
	backends := console.Backends{
		DB: b.db, Redis: b.redis, Topology: tp, Broker: admin, Publisher: pub, Probes: o.probes, Log: log,
		Operator: func(r *http.Request) string {
			if who := r.Header.Get("X-Test-Operator"); who != "" {
				return who
			}
			return "alice"
		},
	}
	if o.backends != nil {
		o.backends(&backends)
	}
	b.console, err = console.New(console.Config{Prefix: "/admin", SampleInterval: cmp.Or(o.interval, 100*time.Millisecond)}, backends)
	require.NoError(t, err)
	b.srv = httptest.NewServer(b.console)
	t.Cleanup(b.srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b.client = &http.Client{Jar: jar, Timeout: 30 * time.Second}
	return b
}

// get fetches a page and returns its status and body.
func (b *testBundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := b.client.Get(b.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// post sends a form as a browser does, from the console's own origin.
func (b *testBundle) post(t *testing.T, path string, form url.Values, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.srv.URL)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf opens a page and returns the token its forms carry.
func (b *testBundle) csrf(t *testing.T, path string) string {
	t.Helper()
	status, body := b.get(t, path)
	require.Equal(t, http.StatusOK, status, body)
	m := csrfInput.FindStringSubmatch(body)
	require.NotNil(t, m, "the page has a form with a CSRF token")
	return m[1]
}

// deadMessage stores one dead message of domain, as its DLQ consumer would.
func (b *testBundle) deadMessage(t *testing.T, domain, messageID, body, lastError string, deadAt time.Time) uint64 {
	t.Helper()
	d, ok := b.tp.Domain(domain)
	require.True(t, ok)
	headers := fmt.Sprintf(`{"__TypeId__":%q,%q:%d,"x-last-error":%q,"x-dead-reason":%q,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
		d.TypeID, d.RetryHeader, d.Retry.MaxRetries, lastError, "retries exhausted")
	var fields map[string]any
	subject := ""
	if json.Unmarshal([]byte(body), &fields) == nil && fields[d.DLQSubject] != nil {
		subject = fmt.Sprint(fields[d.DLQSubject])
	}
	dl := &store.DeadLetter{
		DedupKey: store.DeadLetterKey(d.DLQ, messageID, 0, []byte(body+deadAt.String())), Queue: d.DLQ, RoutingKey: d.DLQKey,
		MessageType: d.TypeID, MessageID: messageID, TraceID: "trace-" + messageID, Subject: subject, Body: []byte(body), Headers: headers,
		RetryCount: d.Retry.MaxRetries, LastError: &lastError, DeadAt: deadAt.UTC(),
	}
	saved, err := store.NewDeadLetters(b.db).Save(context.Background(), d.DLQTable, dl)
	require.NoError(t, err)
	require.True(t, saved)
	return dl.ID
}

// replayedAt reads whether a dead message's row is marked replayed.
func (b *testBundle) replayed(t *testing.T, domain string, id uint64) bool {
	t.Helper()
	d, _ := b.tp.Domain(domain)
	var n int64
	require.NoError(t, b.db.Table(d.DLQTable).Where("id = ? AND replayed_at IS NOT NULL", id).Count(&n).Error)
	return n == 1
}
