// Package rabbitadmin reads a RabbitMQ broker through its management HTTP
// API: what exchanges, queues and bindings exist, with their properties.
// AMQP cannot list bindings, so `islectl topology verify` needs this to
// compare them with the table; the operator console reads each queue's
// depth, consumers and rates from it (Queues).
package rabbitadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eisland/isle/topology"
)

// Client reads one virtual host.
type Client struct {
	base  *url.URL
	vhost string
	http  *http.Client
}

// New returns a client for the management API at rawURL (credentials in its
// userinfo) and the virtual host vhost.
func New(rawURL, vhost string) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("rabbitadmin: management URL %q is not absolute", rawURL)
	}
	return &Client{base: u, vhost: vhost, http: &http.Client{Timeout: 10 * time.Second}}, nil
}

func (c *Client) get(ctx context.Context, what string, v any) error {
	return c.getPath(ctx, what+"/"+url.PathEscape(c.vhost), v)
}

// getPath GETs /api/{path} and decodes the JSON answer into v.
func (c *Client) getPath(ctx context.Context, path string, v any) error {
	base := *c.base
	base.User = nil
	endpoint := strings.TrimSuffix(base.String(), "/") + "/api/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return err
	}
	if c.base.User != nil {
		pass, _ := c.base.User.Password()
		req.SetBasicAuth(c.base.User.Username(), pass)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("rabbitadmin: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("rabbitadmin: GET %s: %s: %s", endpoint, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("rabbitadmin: GET %s: %w", endpoint, err)
	}
	return nil
}

type exchange struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
}

// queue is what Snapshot reads of a queue the management API reports.
type queue struct {
	Name       string         `json:"name"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

type binding struct {
	Source          string `json:"source"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	RoutingKey      string `json:"routing_key"`
}

// Snapshot reads the vhost's exchanges, queues and queue bindings.
func (c *Client) Snapshot(ctx context.Context) (topology.Live, error) {
	var (
		exs []exchange
		qs  []queue
		bs  []binding
	)
	if err := c.get(ctx, "exchanges", &exs); err != nil {
		return topology.Live{}, err
	}
	if err := c.get(ctx, "queues", &qs); err != nil {
		return topology.Live{}, err
	}
	if err := c.get(ctx, "bindings", &bs); err != nil {
		return topology.Live{}, err
	}
	live := topology.Live{Exchanges: make(map[string]topology.LiveExchange), Queues: make(map[string]topology.LiveQueue)}
	for _, e := range exs {
		live.Exchanges[e.Name] = topology.LiveExchange{Type: e.Type, Durable: e.Durable, AutoDelete: e.AutoDelete}
	}
	for _, q := range qs {
		live.Queues[q.Name] = topology.LiveQueue{Durable: q.Durable, AutoDelete: q.AutoDelete, Args: q.Arguments}
	}
	for _, b := range bs {
		if b.DestinationType == "queue" && b.Source != "" {
			live.Bindings = append(live.Bindings, topology.Binding{Exchange: b.Source, Queue: b.Destination, RoutingKey: b.RoutingKey})
		}
	}
	return live, nil
}

// QueueDepth is how many messages a queue holds: ready for a consumer, and
// delivered but not acknowledged yet. The broker refreshes these figures
// every few seconds (collect_statistics_interval, 5 s by default).
type QueueDepth struct {
	Ready   int
	Unacked int
}

// Messages is every message the queue holds.
func (d QueueDepth) Messages() int { return d.Ready + d.Unacked }

// ErrNoStatistics is returned by Depth for a queue the broker has not
// counted: just declared, just after a restart, or with the management
// metrics collector disabled. Its depth is unknown, not zero.
var ErrNoStatistics = errors.New("rabbitadmin: the broker has no message counts for the queue (yet)")

// Depth reads one queue's depth.
func (c *Client) Depth(ctx context.Context, queue string) (QueueDepth, error) {
	var q struct {
		Ready   *int `json:"messages_ready"`
		Unacked *int `json:"messages_unacknowledged"`
	}
	if err := c.getPath(ctx, "queues/"+url.PathEscape(c.vhost)+"/"+url.PathEscape(queue), &q); err != nil {
		return QueueDepth{}, err
	}
	if q.Ready == nil || q.Unacked == nil {
		return QueueDepth{}, fmt.Errorf("%w: %s", ErrNoStatistics, queue)
	}
	return QueueDepth{Ready: *q.Ready, Unacked: *q.Unacked}, nil
}
