// Package messaging moves every message of the fleet, over watermill,
// watermill-amqp v3 (consuming) and amqp091-go (publishing), around the
// traps of those libraries (doc/messaging.md):
//
//   - Publisher: Isle's own, on amqp091-go: confirmed, persistent publishes
//     pipelined on a few confirm channels, each bounded by a timeout, routed
//     by the topology (exchange and routing key per message), with content
//     type, __TypeId__ and priority set; it reconnects by itself after a
//     connection loss, and Ping says whether it can publish now.
//   - Marshaler: accepts every AMQP header type (x-death arrays, longs,
//     timestamps, tables), so no delivery is ever rejected before a handler;
//     it refuses only the empty phantom a cancelled consumer reads.
//   - Consumer: N handlers per queue, prefetch from configuration, and a
//     shutdown that stops taking deliveries and lets those in flight finish.
//   - Flow: the Spring backend's retry pattern — a failed message is copied to the
//     retry routing key with its retry header + 1 and lastError, confirmed,
//     then acked; at the maximum, or when it cannot be decoded, it goes to
//     the DLQ the same way. Handler errors never become nacks.
//
// A nack is kept for what only the broker can fix (a copy that could not be
// published, a shutdown that outlived its timeout) and always requeues: the
// contract's main queues have no dead-letter exchange, so a nack without requeue
// would lose the message.
package messaging
