package messaging

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// addresses is the list of broker URLs a configuration names: urls when it
// has any, else the single url.
func addresses(url string, urls []string) []string {
	if len(urls) > 0 {
		return urls
	}
	return []string{url}
}

// DialFirst connects to the first of urls that answers, trying them in
// order from urls[start % len(urls)] (a reconnect starts after the address
// it lost), each with cfg. It returns the connection and the index of its
// URL; its error names every address tried, without credentials. One call
// is one pass: the callers keep their own backoff between passes.
func DialFirst(urls []string, start int, cfg amqp.Config) (*amqp.Connection, int, error) {
	if len(urls) == 0 {
		return nil, 0, errors.New("no RabbitMQ address")
	}
	var errs []error
	for i := range urls {
		at := (start + i) % len(urls)
		conn, err := amqp.DialConfig(urls[at], cfg)
		if err == nil {
			return conn, at, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", hostOf(urls[at]), err))
	}
	return nil, 0, errors.Join(errs...)
}

// hostOf is the host:port of an AMQP URL, for messages (never its password).
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "(unparsable URL)"
}

// dial opens an AMQP connection named name to the first of urls that
// answers (DialFirst), whose writes share system calls (coalesce), and
// returns its socket too: closing it unblocks a writer stuck on a peer that
// stopped reading, which closing the connection would not. Until stop is
// called, ctx ending closes the socket, which aborts a handshake or a
// declaration the broker does not answer. at is the index of the URL.
func dial(ctx context.Context, urls []string, start int, name string) (conn *amqp.Connection, raw net.Conn, at int, stop func(), err error) {
	var stops []func() bool
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	conn, at, err = DialFirst(urls, start, amqp.Config{
		Heartbeat:  heartbeat,
		Properties: amqp.Table{"connection_name": name},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := nc.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
				_ = nc.Close()
				return nil, err
			}
			stops = append(stops, context.AfterFunc(ctx, func() { _ = nc.Close() }))
			raw = nc
			return coalesce(nc), nil
		},
	})
	if err != nil {
		stop()
		return nil, nil, 0, func() {}, fmt.Errorf("dial: %w", err)
	}
	return conn, raw, at, stop, nil
}
