package rabbitadmin

import (
	"context"
	"errors"
	"net/url"
)

// QueueStats is what the broker counts of one queue: its depth, its
// consumers and its message rates (messages per second, averaged by the
// broker over its last few statistics intervals).
type QueueStats struct {
	Name        string
	Ready       int
	Unacked     int
	Consumers   int
	PublishRate float64 // messages published to the queue per second
	DeliverRate float64 // messages delivered to consumers (or got) per second
	// Counted is false for a queue the broker has no message counts for yet
	// (see ErrNoStatistics): its depth is unknown, not zero.
	Counted bool
}

// Messages is every message the queue holds.
func (s QueueStats) Messages() int { return s.Ready + s.Unacked }

// queueStats is one row of GET /api/queues/{vhost}?columns=...
type queueStats struct {
	Name         string `json:"name"`
	Ready        *int   `json:"messages_ready"`
	Unacked      *int   `json:"messages_unacknowledged"`
	Consumers    int    `json:"consumers"`
	MessageStats struct {
		Publish struct {
			Rate float64 `json:"rate"`
		} `json:"publish_details"`
		DeliverGet struct {
			Rate float64 `json:"rate"`
		} `json:"deliver_get_details"`
	} `json:"message_stats"`
}

// statsColumns are the only fields Queues asks for: the broker leaves the
// others (arguments, policies, per-node details) out of the answer.
const statsColumns = "name,messages_ready,messages_unacknowledged,consumers," +
	"message_stats.publish_details.rate,message_stats.deliver_get_details.rate"

// Queues reads the statistics of every queue of the vhost, by name, in one
// request.
func (c *Client) Queues(ctx context.Context) (map[string]QueueStats, error) {
	var rows []queueStats
	if err := c.getPath(ctx, "queues/"+url.PathEscape(c.vhost)+"?columns="+url.QueryEscape(statsColumns), &rows); err != nil {
		return nil, err
	}
	out := make(map[string]QueueStats, len(rows))
	for _, q := range rows {
		s := QueueStats{
			Name: q.Name, Consumers: q.Consumers, Counted: q.Ready != nil && q.Unacked != nil,
			PublishRate: q.MessageStats.Publish.Rate, DeliverRate: q.MessageStats.DeliverGet.Rate,
		}
		if s.Counted {
			s.Ready, s.Unacked = *q.Ready, *q.Unacked
		}
		out[q.Name] = s
	}
	return out, nil
}

// Ping asks the management API for its overview: it fails when the broker's
// management plugin does not answer.
func (c *Client) Ping(ctx context.Context) error {
	var v struct {
		Version string `json:"management_version"`
	}
	if err := c.getPath(ctx, "overview", &v); err != nil {
		return err
	}
	if v.Version == "" {
		return errors.New("rabbitadmin: the overview names no management version")
	}
	return nil
}
