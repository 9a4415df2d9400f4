//go:build chaos

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/mail"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/emersion/go-smtp"
	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// The chaos fleet: the real binaries, supervised (a dead one is started
// again, as an orchestrator would), talking to MySQL, Redis and RabbitMQ
// through in-process toxiproxy proxies, and mailing to an SMTP server in
// the test that counts what it receives.

// deps are the proxies between the fleet and its services.
type deps struct {
	srv     *toxiproxy.ApiServer
	proxies map[string]*toxiproxy.Proxy // mysql, redis, rabbitmq
}

func newDeps(t *testing.T, upstream map[string]string) *deps {
	t.Helper()
	d := &deps{srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()), proxies: map[string]*toxiproxy.Proxy{}}
	for name, up := range upstream {
		p := toxiproxy.NewProxy(d.srv, name, "127.0.0.1:0", up)
		require.NoError(t, p.Start())
		d.proxies[name] = p
	}
	t.Cleanup(func() {
		for _, p := range d.proxies {
			p.Stop()
		}
	})
	return d
}

// addr is the proxy's listening address.
func (d *deps) addr(name string) string { return d.proxies[name].Listen }

// down refuses and cuts every connection to the service; up lets them in.
func (d *deps) down(name string) { d.proxies[name].Stop() }

func (d *deps) up(t *testing.T, name string) {
	t.Helper()

	for range 50 { // the port may still be in TIME_WAIT for a moment
		if err := d.proxies[name].Start(); err == nil || strings.Contains(err.Error(), "already started") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("chaos: proxy %s did not come back", name)
}

// toxic adds a toxic to the service's connections (both directions).
func (d *deps) toxic(t *testing.T, name, kind string, attrs string) {
	t.Helper()

	for _, stream := range []string{"downstream", "upstream"} {
		js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, kind+"-"+stream, kind, stream, attrs)
		_, err := d.proxies[name].Toxics.AddToxicJson(strings.NewReader(js))
		require.NoError(t, err)
	}
}

func (d *deps) clear(name string) { d.proxies[name].Toxics.ResetToxics(context.Background()) }

// member is one supervised binary of the fleet.
type member struct {
	name, bin string
	args      []string
	env       fleetEnv
	ready     string // the line that says it started

	mu       sync.Mutex
	p        *proc
	restarts int
}

func (m *member) start(t *testing.T) {
	t.Helper()
	p := start(t, m.env, m.bin, m.args...)
	p.waitFor(t, time.Minute, m.ready)
	m.mu.Lock()
	m.p = p
	m.mu.Unlock()
}

// kill sends sig and waits for the exit (a SIGTERM drains first), then
// starts the binary again after pause.
func (m *member) kill(t *testing.T, sig syscall.Signal, pause time.Duration) {
	t.Helper()
	m.mu.Lock()
	p := m.p
	m.restarts++
	m.mu.Unlock()
	_ = p.cmd.Process.Signal(sig)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(time.Minute):
		t.Fatalf("chaos: %s did not exit within a minute of %s:\n%s", m.name, sig, p.output())
	}
	time.Sleep(pause)
	m.start(t)
}

// outputs is every line each start of the member wrote.
func (m *member) alive() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.p != nil && m.p.cmd.ProcessState == nil
}

// mailSink is an SMTP server that counts the messages it receives, by
// recipient and Message-ID.
type mailSink struct {
	addr string
	mu   sync.Mutex
	// byID is deliveries per Message-ID; to is the recipient of each id.
	byID map[string]int
	to   map[string]string
	subj map[string]string
}

func newMailSink(t *testing.T) *mailSink {
	t.Helper()
	s := &mailSink{byID: map[string]int{}, to: map[string]string{}, subj: map[string]string{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = l.Addr().String()
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &sinkSession{sink: s}, nil }))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); _ = l.Close() })
	return s
}

type sinkSession struct {
	sink *mailSink
	to   []string
}

func (s *sinkSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *sinkSession) Reset()        { s.to = nil }
func (s *sinkSession) Logout() error { return nil }
func (s *sinkSession) Data(r io.Reader) error {
	msg, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	id := msg.Header.Get("Message-Id")
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	s.sink.byID[id]++
	s.sink.to[id] = strings.Join(s.to, ",")
	s.sink.subj[id] = msg.Header.Get("Subject")
	return nil
}

// mails returns, per recipient, the distinct messages and the deliveries.
func (s *mailSink) mails() (distinct, deliveries map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	distinct, deliveries = map[string]int{}, map[string]int{}
	for id, n := range s.byID {
		distinct[s.to[id]]++
		deliveries[s.to[id]] += n
	}
	return distinct, deliveries
}

// viaProxy rewrites a MySQL DSN to reach the server through addr.
func viaProxy(t *testing.T, dsn, addr string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	require.Equal(t, "tcp", c.Net, "the chaos suite reaches MySQL over TCP (a socket cannot be proxied)")
	c.Addr = addr
	return c.FormatDSN()
}

// mysqlAddr is the host:port of a TCP DSN.
func mysqlAddr(t *testing.T, dsn string) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	return c.Addr
}

// amqpAddr is the host:port of an AMQP URL.
func amqpAddr(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Host
}

// brokerRestart stops and starts the RabbitMQ application on this machine:
// every connection drops, and durable queues and persistent messages
// survive, as in a restart of the server.
func brokerRestart(t *testing.T, down time.Duration) error {
	t.Helper()
	if out, err := exec.Command("rabbitmqctl", "stop_app").CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl stop_app: %v: %s", err, out)
	}
	time.Sleep(down)
	if out, err := exec.Command("rabbitmqctl", "start_app").CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl start_app: %v: %s", err, out)
	}
	return nil
}

// has reports whether a message whose Message-ID contains part arrived.
func (s *mailSink) has(part string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.byID {
		if strings.Contains(id, part) {
			return true
		}
	}
	return false
}
