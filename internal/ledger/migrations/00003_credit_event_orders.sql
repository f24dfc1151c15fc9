-- +goose Up

-- The written order an allocation change was made under (a ClientAgreement's
-- spec.orderReference), for the audit trail and invoicing.
ALTER TABLE credit_events ADD COLUMN order_reference text;
CREATE INDEX credit_events_at ON credit_events (at) WHERE kind = 'session';

-- +goose Down
DROP INDEX credit_events_at;
ALTER TABLE credit_events DROP COLUMN order_reference;
