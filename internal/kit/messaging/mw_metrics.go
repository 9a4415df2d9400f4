package messaging

import (
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// verdict is what the middleware that decides a delivery's outcome returns
// beside the handler's answer: the outcome (retried, dead, failed,
// requeued, stored, ok) and the time of the handler alone, a copy's
// publish left out.
type verdict struct {
	outcome string
	took    time.Duration
}

// decider runs h on msg, decides the delivery's outcome and returns it
// with what the router is to be answered: RetryMiddleware's and
// DeadLetterMiddleware's own work.
type decider func(h message.HandlerFunc, msg *message.Message) (verdict, []*message.Message, error)

// counted is the middleware that runs decide and counts each verdict it
// returns for domain in m (isle_messages_total by outcome,
// isle_handler_duration_seconds); a nil m counts nothing.
func counted(domain string, m *Metrics, decide decider) message.HandlerMiddleware {
	dm := m.forDomain(domain)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			v, out, err := decide(h, msg)
			dm.handled(v.outcome, v.took)
			return out, err
		}
	}
}
