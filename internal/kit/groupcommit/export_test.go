package groupcommit

import "github.com/eisland/isle/internal/kit/testsignal"

// Queued is signalled with the number of calls of each Do or DoAll once
// they are queued, when a test turns it on.
func (b *Batcher[Q, R]) Queued() *testsignal.Signal[int] { return &b.queued }
