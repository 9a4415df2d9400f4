// Package messaging moves every message of the fleet on amqp091-go, in
// Watermill's terms: a publisher, a subscriber, handler middleware, and
// watermill's own message.Router running them (doc/messaging.md).
//
//   - Publisher: Isle's own: confirmed, persistent publishes pipelined on a
//     few confirm channels, each bounded by a timeout, routed by the
//     topology (exchange and routing key per message), with content type,
//     __TypeId__ and priority set; it reconnects by itself after a
//     connection loss, and Ping says whether it can publish now.
//     Publisher.Watermill gives it to watermill components as a
//     message.Publisher whose topic is the routing key (the Marshaler maps
//     watermill metadata to AMQP properties and headers).
//   - Subscriber: a message.Subscriber whose topic is a queue. Subscribe
//     consumes it on a few channels, each with its prefetch, and hands every
//     delivery on at once as a *message.Message carrying its Delivery
//     (DeliveryFrom), never waiting for the ack of the one before. Acks are
//     coalesced per channel into multiple acks, and a nack always requeues.
//     Every AMQP header type (x-death arrays, longs, timestamps, tables) is
//     accepted, so no delivery is rejected before a handler. It reconnects
//     by itself; Close stops taking deliveries, hands out what the channels
//     hold (FinishHeld), and waits for what it handed out to be answered, up
//     to its shutdown timeout.
//   - Middleware: a consumer is a HandlerFunc of one Delivery, made a
//     router handler by RouterHandler. MainChain is the middleware of a main
//     queue: the trace id into the context, the metrics, the Spring
//     backend's retry pattern (RetryMiddleware), panics made errors, and the
//     handler's timeout. A failed message is copied to the retry routing key
//     with its retry header + 1 and lastError, confirmed, then acked; at the
//     maximum, or when it cannot be decoded, it goes to the DLQ the same way.
//     A delivery without a message_id gets an id of its own first
//     (Delivery.IsleID), which its copies carry. DeadLetterChain is the
//     middleware of a DLQ, whose handler stores dead messages, with
//     DeadLetterMiddleware in the place of the retry pattern. ChainConfig
//     tunes both.
//   - Router: the worker adds one handler per queue to a message.Router
//     (AddConsumerHandler over the Subscriber, AddMiddleware with the
//     queue's chain). The Router runs each message's handler in a goroutine
//     of its own, so a queue has as many in flight as its channels hold; it
//     acks a message whose chain answered nil and nacks one that answered
//     an error.
//
// Handler errors never become nacks: the retry pattern answers nil once its
// copy is confirmed. A nack is kept for what only the broker can fix (a copy
// that could not be published, a shutdown that outlived its timeout) and
// always requeues: the contract's classic main queues have no dead-letter
// exchange, so a nack without requeue would lose the message.
package messaging
