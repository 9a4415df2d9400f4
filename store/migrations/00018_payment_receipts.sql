-- The receipt consumer sends one receipt mail per order (doc/payments.md): it
-- records the send on the order, and a redelivered receipt message finds it.
-- Notifications are looked up by order for an operator's view of a payment.

-- +goose Up
ALTER TABLE payment_order ADD COLUMN receipt_sent_at DATETIME(6) NULL AFTER paid_at;
ALTER TABLE payment_notify_record ADD KEY idx_payment_notify_order (out_trade_no);

-- +goose Down
ALTER TABLE payment_notify_record DROP INDEX idx_payment_notify_order;
ALTER TABLE payment_order DROP COLUMN receipt_sent_at;
