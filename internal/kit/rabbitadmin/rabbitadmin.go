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
	"sync"
	"time"

	"github.com/eisland/isle/topology"
)

// Client reads one virtual host, through the first of its management URLs
// that answers (one per node of a cluster: every node serves the whole
// cluster's API).
type Client struct {
	bases []*url.URL
	vhost string
	http  *http.Client

	mu sync.Mutex
	at int // index in bases of the URL that answered last
}

// New returns a client for the management API at rawURL (credentials in its
// userinfo) and the virtual host vhost. rawURL may list several URLs,
// separated by commas (a comma inside one is written %2C): each request
// goes to the one that answered last, and on a connection error to the
// next ones in order.
func New(rawURL, vhost string) (*Client, error) {
	c := &Client{vhost: vhost, http: &http.Client{Timeout: 10 * time.Second}}
	for item := range strings.SplitSeq(rawURL, ",") {
		u, err := url.Parse(strings.TrimSpace(item))
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("rabbitadmin: management URL %q is not absolute", redact(item))
		}
		c.bases = append(c.bases, u)
	}
	return c, nil
}

// redact hides the password of a URL that may not parse.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		return "…" + raw[at:]
	}
	return raw
}

func (c *Client) get(ctx context.Context, what string, v any) error {
	return c.getPath(ctx, what+"/"+url.PathEscape(c.vhost), v)
}

// getPath GETs /api/{path} and decodes the JSON answer into v, from the
// URL that answered last or, when it cannot be reached, the next ones.
func (c *Client) getPath(ctx context.Context, path string, v any) error {
	c.mu.Lock()
	start := c.at
	c.mu.Unlock()
	var errs []error
	for i := range c.bases {
		at := (start + i) % len(c.bases)
		reached, err := c.getFrom(ctx, c.bases[at], path, v)
		if reached {
			c.mu.Lock()
			c.at = at
			c.mu.Unlock()
			return err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// getFrom GETs /api/{path} of base; reached is false when no answer came.
func (c *Client) getFrom(ctx context.Context, base *url.URL, path string, v any) (reached bool, err error) {
	plain := *base
	plain.User = nil
	endpoint := strings.TrimSuffix(plain.String(), "/") + "/api/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return true, err
	}
	if base.User != nil {
		pass, _ := base.User.Password()
		req.SetBasicAuth(base.User.Username(), pass)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("rabbitadmin: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return true, fmt.Errorf("rabbitadmin: GET %s: %s: %s", endpoint, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return true, fmt.Errorf("rabbitadmin: GET %s: %w", endpoint, err)
	}
	return true, nil
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
