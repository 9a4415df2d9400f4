package topology

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Queue types: the type every queue of the contract is declared with
// (Config.QueueType). Classic is the Spring backend's: its queues carry no
// x-queue-type argument. doc/contract.md, "Queue type", says why changing it
// is a change both sides of the broker make together.
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
)

// DeliveryLimit is the x-delivery-limit of a quorum main queue: past that
// many requeues of one message the broker dead-letters it to its domain's
// DLQ. doc/contract.md, "Queue type", says why 50.
const DeliveryLimit = 50

// DLQDeliveryLimit is the x-delivery-limit of a quorum DLQ, which has
// nowhere to dead-letter to: the largest 32-bit value, so that a dead
// message the DLQ consumer cannot store is never dropped.
const DLQDeliveryLimit = math.MaxInt32

// QueueTypes lists the values Config.QueueType takes ("" is QueueClassic).
func QueueTypes() []string { return []string{QueueClassic, QueueQuorum} }

// QueueType is the type the queues are declared with, but those of
// ClassicQueues (QueueClassic or QueueQuorum).
func (t *Topology) QueueType() string { return t.queueType }

// setQueueType resolves cfg's queue type and its classic exceptions, and
// refuses a quorum queue that could not keep its contract's arguments: a
// priority queue (x-max-priority; RabbitMQ 3.10's quorum queues have no
// priorities) stays classic only when ClassicQueues names it. Every queue
// of the contract is durable, neither exclusive nor auto-delete, as a
// quorum queue must be (declareQueue).
func (t *Topology) setQueueType(cfg Config) []error {
	t.queueType = cfg.QueueType
	if t.queueType == "" {
		t.queueType = QueueClassic
	}
	if !slices.Contains(QueueTypes(), t.queueType) {
		return []error{fmt.Errorf("topology: queue type %q: want classic or quorum", cfg.QueueType)}
	}
	var errs []error
	t.classic = make(map[string]bool)
	for _, name := range cfg.ClassicQueues {
		if _, ok := t.DomainByQueue(name); !ok {
			errs = append(errs, fmt.Errorf("topology: classic queue %q: no such queue (the names are prefixed, as `islectl topology show` lists them)", name))
		}
		t.classic[name] = true
	}
	if t.queueType != QueueQuorum {
		return errs
	}
	for _, q := range t.queues() {
		if t.classic[q.Name] {
			continue
		}
		if _, ok := q.Args["x-max-priority"]; ok {
			errs = append(errs, fmt.Errorf("topology: queue %s: a quorum queue cannot keep its x-max-priority (RabbitMQ 3.10 has no priorities on quorum queues); "+
				"keep it classic (RABBITMQ_CLASSIC_QUEUES) or declare every queue classic", q.Name))
		}
	}
	return errs
}

// withType sets the x-queue-type argument of the queues of qs that are
// quorum queues, and their delivery limit (quorumArgs).
func (t *Topology) withType(qs []Queue) []Queue {
	if t.queueType != QueueQuorum {
		return qs
	}
	for i, q := range qs {
		if t.classic[q.Name] {
			continue
		}
		args := maps.Clone(q.Args)
		if args == nil {
			args = make(map[string]any)
		}
		args["x-queue-type"] = QueueQuorum
		d, _ := t.Domain(q.Domain)
		maps.Copy(args, quorumArgs(q.Role, d))
		qs[i].Args = args
	}
	return qs
}

// quorumArgs are the arguments a quorum queue of role in d adds to the
// contract's own. RabbitMQ 4 drops a quorum queue's message requeued past
// its delivery limit (20 unless declared) when the queue has no
// dead-letter exchange, and the contract's main queues and DLQs have none.
// So a main queue declares DeliveryLimit and dead-letters past it to its
// domain's DLQ (usage stats has no DLQ: its message is dropped, as its
// failures are); a DLQ declares DLQDeliveryLimit; a retry queue, which no
// one consumes (its messages leave by their TTL), keeps its arguments.
func quorumArgs(role Role, d Domain) map[string]any {
	switch role {
	case RoleMain:
		args := map[string]any{"x-delivery-limit": int32(DeliveryLimit)}
		if d.DLQ != "" {
			args["x-dead-letter-exchange"] = d.Exchange
			args["x-dead-letter-routing-key"] = d.DLQKey
		}
		return args
	case RoleDLQ:
		return map[string]any{"x-delivery-limit": int32(DLQDeliveryLimit)}
	}
	return nil
}

// Policy is a RabbitMQ policy for one queue: what `rabbitmqctl set_policy
// --apply-to queues Name Pattern Definition` sets.
type Policy struct {
	Name       string
	Queue      string         // the queue it applies to
	Pattern    string         // a regular expression that matches Queue alone
	Definition map[string]any // its keys are the x- arguments' names without the x-
}

// QuorumPolicies returns a policy for each quorum queue that declares a
// delivery limit, with the values of its arguments (quorumArgs): what
// gives a quorum queue declared before those arguments the same limit
// and dead-letter target without declaring it anew (doc/contract.md,
// "Queue type"). Where a queue has both, its arguments win over the
// policy's dead-letter target, and the lower delivery limit applies.
func (t *Topology) QuorumPolicies() []Policy {
	var out []Policy
	for _, q := range t.Queues() {
		if q.Args["x-queue-type"] != QueueQuorum {
			continue
		}
		d, _ := t.Domain(q.Domain)
		args := quorumArgs(q.Role, d)
		if len(args) == 0 {
			continue
		}
		def := make(map[string]any, len(args))
		for k, v := range args {
			def[strings.TrimPrefix(k, "x-")] = v
		}
		out = append(out, Policy{Name: "isle-limit." + q.Name, Queue: q.Name, Pattern: "^" + regexp.QuoteMeta(q.Name) + "$", Definition: def})
	}
	return out
}
