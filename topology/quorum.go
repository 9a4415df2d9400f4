package topology

import (
	"fmt"
	"maps"
	"slices"
)

// Queue types: the type every queue of the contract is declared with
// (Config.QueueType). Classic is the Spring backend's: its queues carry no
// x-queue-type argument. doc/contract.md, "Queue type", says why changing it
// is a change both sides of the broker make together.
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
)

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
// quorum queues.
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
		qs[i].Args = args
	}
	return qs
}
