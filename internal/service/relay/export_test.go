package relay

import "github.com/eisland/isle/internal/kit/testsignal"

// Poll is what one batch of a running relay found, and how long it waits
// before the next.
type Poll = poll

// Polled is signalled after each batch of Run, once a test turns it on.
func (r *Relay) Polled() *testsignal.Signal[Poll] { return &r.polled }
