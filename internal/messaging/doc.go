// Package messaging moves every message of the fleet, on amqp091-go, around
// the traps of the client libraries (doc/messaging.md):
//
//   - Publisher: Isle's own, on amqp091-go: confirmed, persistent publishes
//     pipelined on a few confirm channels, each bounded by a timeout, routed
//     by the topology (exchange and routing key per message), with content
//     type, __TypeId__ and priority set; it reconnects by itself after a
//     connection loss, and Ping says whether it can publish now.
//   - Consumer: Isle's own too: N channels per queue, each handing its
//     deliveries to the route's handler one at a time, or, for a batching
//     consumer, a batch at a time (what the channel holds, never waiting
//     for more) settled with one multiple ack; every AMQP header type
//     (x-death arrays, longs, timestamps, tables) is accepted, so no delivery
//     is rejected before a handler; it reconnects by itself, and its
//     shutdown stops taking deliveries and lets those in flight finish.
//   - Watermill: the publisher also serves as a watermill message.Publisher
//     (the Marshaler maps watermill metadata to AMQP properties and headers).
//   - Flow: the Spring backend's retry pattern — a failed message is copied to the
//     retry routing key with its retry header + 1 and lastError, confirmed,
//     then acked; at the maximum, or when it cannot be decoded, it goes to
//     the DLQ the same way. Handler errors never become nacks. A delivery
//     without a message_id gets an id of its own first (Delivery.IsleID),
//     which its copies carry.
//
// A nack is kept for what only the broker can fix (a copy that could not be
// published, a shutdown that outlived its timeout) and always requeues: the
// contract's main queues have no dead-letter exchange, so a nack without requeue
// would lose the message.
package messaging
