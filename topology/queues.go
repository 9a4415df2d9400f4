package topology

// Role tells a queue's place in its domain's retry pattern.
type Role string

// Queue roles.
const (
	RoleMain  Role = "main"
	RoleRetry Role = "retry"
	RoleDLQ   Role = "dlq"
)

// Queue is one durable queue, bound to its domain's exchange by one routing key.
type Queue struct {
	Name       string
	Domain     string
	Role       Role
	Exchange   string
	RoutingKey string
	// Args are the x- arguments with the AMQP types a Spring producer declares
	// (int32 for numbers): RabbitMQ refuses a re-declaration whose types differ.
	Args map[string]any
}

// Queues lists the 22 queues of the contract, in the Spring backend's Queue
// Summary order, each quorum queue with its x-queue-type (Config.QueueType).
func (t *Topology) Queues() []Queue { return t.withType(t.queues()) }

// queues lists the queues with the contract's own arguments.
func (t *Topology) queues() []Queue {
	var qs []Queue
	for _, d := range t.domains {
		main := Queue{Name: d.Queue, Domain: d.Name, Role: RoleMain, Exchange: d.Exchange, RoutingKey: d.RoutingKey}
		if d.MaxPriority > 0 {
			main.Args = map[string]any{"x-max-priority": int32(d.MaxPriority)}
		}
		qs = append(qs, main)
		if !d.HasRetry() {
			continue
		}
		qs = append(qs,
			Queue{
				Name: d.RetryQueue, Domain: d.Name, Role: RoleRetry, Exchange: d.Exchange, RoutingKey: d.RetryKey,
				Args: map[string]any{
					"x-message-ttl":             int32(d.Retry.Delay.Milliseconds()),
					"x-dead-letter-exchange":    d.Exchange,
					"x-dead-letter-routing-key": d.RoutingKey,
				},
			},
			Queue{Name: d.DLQ, Domain: d.Name, Role: RoleDLQ, Exchange: d.Exchange, RoutingKey: d.DLQKey},
		)
	}
	return qs
}
