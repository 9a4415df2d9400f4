package messaging

import (
	"context"
	"fmt"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// dial opens an AMQP connection named name whose writes share system calls
// (coalesce), and returns the socket too: closing it unblocks a writer stuck
// on a peer that stopped reading, which closing the connection would not.
func dial(ctx context.Context, url, name string) (*amqp.Connection, net.Conn, error) {
	var raw net.Conn
	conn, err := amqp.DialConfig(url, amqp.Config{
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
			raw = nc
			return coalesce(nc), nil
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	return conn, raw, nil
}
