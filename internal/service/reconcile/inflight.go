package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// InFlight says which deduction messages may still arrive (queued, being
// handled, or stored dead and not replayed); balance-sync corrects no
// drift such a message may still move. An error means it cannot tell:
// every drift waits.
type InFlight interface {
	DeductionsInFlight(ctx context.Context) (Holds, error)
}

// Holds is what an InFlight gate found; the zero Holds holds nobody back.
type Holds struct {
	// All, when not "", holds every drift back and says why: messages whose
	// users cannot be known, such as those queued in the broker.
	All string
	// Dead are the stored dead messages not replayed, judged: those that
	// Hold hold back their own user's drifts.
	Dead []DeadDeduction
}

// Held returns the users stored dead messages hold back, each with its
// messages ("agent-billing/12").
func (h Holds) Held() map[string][]string {
	out := map[string][]string{}
	for _, d := range h.Dead {
		if d.Holds {
			out[d.User] = append(out[d.User], d.Ref.String())
		}
	}
	return out
}

// String says what holds drifts back, "" for nothing.
func (h Holds) String() string {
	if h.All != "" {
		return h.All
	}
	var parts []string
	for _, d := range h.Dead {
		if d.Holds {
			parts = append(parts, d.User+" by "+d.Ref.String())
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the DLQ table holds messages not replayed that may still apply: " + strings.Join(parts, ", ")
}

// QueueDepths reads how many messages a queue holds (rabbitadmin.Client).
type QueueDepths interface {
	Depth(ctx context.Context, queue string) (rabbitadmin.QueueDepth, error)
}

// BillingInFlight is the InFlight gate of a fleet (doc/money.md,
// "Deductions other producers take"). What it can know decides whom it
// holds back:
//   - while the agent-billing main, retry or DLQ queue holds messages
//     (ready, or delivered and not acknowledged: the broker's management
//     API counts both, where an AMQP passive declare sees only the ready
//     ones, and a busy worker can hold thousands in its prefetch), every
//     drift waits: whose money they move cannot be read without consuming
//     them. They move on by themselves: applied, or stored dead by the DLQ
//     consumer;
//   - a stored dead message not replayed is read and judged (DeadBilling):
//     one a replay may still apply holds back its own user alone; one that
//     can never apply holds nobody.
//
// A queue the broker has not counted is an error: its depth is unknown.
type BillingInFlight struct {
	queues []string
	depths QueueDepths
	dead   *DeadBilling
}

// NewBillingInFlight returns the gate over tp's agent-billing domain, its
// dead messages stored in db.
func NewBillingInFlight(tp *topology.Topology, depths QueueDepths, db *gorm.DB) (*BillingInFlight, error) {
	d, ok := tp.Domain(topology.DomainAgentBilling)
	if !ok {
		return nil, fmt.Errorf("reconcile: the topology has no %s domain", topology.DomainAgentBilling)
	}
	dead, err := NewDeadBilling(db, tp)
	if err != nil {
		return nil, err
	}
	return &BillingInFlight{queues: []string{d.Queue, d.RetryQueue, d.DLQ}, depths: depths, dead: dead}, nil
}

// DeductionsInFlight implements InFlight.
func (b *BillingInFlight) DeductionsInFlight(ctx context.Context) (Holds, error) {
	for _, q := range b.queues {
		d, err := b.depths.Depth(ctx, q)
		if err != nil {
			return Holds{}, fmt.Errorf("depth of %s: %w", q, err)
		}
		if n := d.Messages(); n > 0 {
			return Holds{All: fmt.Sprintf("%s holds %d messages (%d unacknowledged), whose users cannot be read without consuming them", q, n, d.Unacked)}, nil
		}
	}
	dead, err := b.dead.Read(ctx)
	if err != nil {
		return Holds{}, err
	}
	return Holds{Dead: dead}, nil
}
