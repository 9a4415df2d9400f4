// Package relay publishes the outbox tables (doc/outbox.md): for each table
// of store.OutboxTables it claims the rows due in a short READ COMMITTED
// transaction (SELECT ... FOR UPDATE SKIP LOCKED, then a lease), publishes
// them with publisher confirms while holding no lock, and marks the
// confirmed ones published, fenced by the claim. A failed publish leaves
// its row to a later claim after a backoff; a relay that dies leaves its
// rows to the lease. Delivery is at least once, and any number of relays may
// share the tables.
package relay
