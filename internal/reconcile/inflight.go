package reconcile

import (
	"context"
	"fmt"

	"github.com/eisland/isle/internal/dlq"
	"github.com/eisland/isle/internal/rabbitadmin"
	"github.com/eisland/isle/topology"
)

// QueueDepths reads how many messages a queue holds (rabbitadmin.Client).
type QueueDepths interface {
	Depth(ctx context.Context, queue string) (rabbitadmin.QueueDepth, error)
}

// BillingInFlight is the InFlight gate of a fleet: a deduction message may
// still arrive while the agent-billing main, retry or DLQ queue holds
// messages (ready, or delivered and not acknowledged: the broker's
// management API counts both, where an AMQP passive declare sees only the
// ready ones, and a busy worker can hold thousands in its prefetch; a dead
// message waits in the DLQ queue until the DLQ consumer stores it), or
// while the domain's DLQ table holds messages not replayed (a replay brings
// them back). It cannot tell which users those messages are for, so while
// any is there, no user is adjusted. A queue the broker has not counted is
// an error: its depth is unknown.
type BillingInFlight struct {
	queues []string
	depths QueueDepths
	dead   *dlq.Store
}

// NewBillingInFlight returns the gate over tp's agent-billing domain.
func NewBillingInFlight(tp *topology.Topology, depths QueueDepths, dead *dlq.Store) (*BillingInFlight, error) {
	d, ok := tp.Domain(topology.DomainAgentBilling)
	if !ok {
		return nil, fmt.Errorf("reconcile: the topology has no %s domain", topology.DomainAgentBilling)
	}
	return &BillingInFlight{queues: []string{d.Queue, d.RetryQueue, d.DLQ}, depths: depths, dead: dead}, nil
}

// DeductionsInFlight implements InFlight.
func (b *BillingInFlight) DeductionsInFlight(ctx context.Context) (string, error) {
	for _, q := range b.queues {
		d, err := b.depths.Depth(ctx, q)
		if err != nil {
			return "", fmt.Errorf("depth of %s: %w", q, err)
		}
		if n := d.Messages(); n > 0 {
			return fmt.Sprintf("%s holds %d messages (%d unacknowledged)", q, n, d.Unacked), nil
		}
	}
	dead, err := b.dead.List(ctx, dlq.Filter{Domains: []string{topology.DomainAgentBilling}, NotReplayed: true, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(dead) > 0 {
		return "the agent-billing DLQ holds messages not replayed (islectl dlq list -domain agent-billing; replay or resolve them)", nil
	}
	return "", nil
}
