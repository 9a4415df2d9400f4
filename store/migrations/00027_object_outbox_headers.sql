-- The trace context of the transaction that queued an object's
-- replication (traceparent, tracestate, baggage), as a JSON object, as
-- outbox.headers holds a message's: the relay publishes the replication
-- with it, so the replication continues the upload's trace (doc/tracing.md).
-- Rows queued before it have none ('{}').

-- +goose Up
ALTER TABLE object_outbox ADD COLUMN headers TEXT NOT NULL DEFAULT ('{}') AFTER trace_id;

-- +goose Down
ALTER TABLE object_outbox DROP COLUMN headers;
