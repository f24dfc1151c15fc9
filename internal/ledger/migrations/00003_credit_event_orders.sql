-- +goose Up

-- The written order an allocation change was made under (a ClientAgreement's
-- spec.orderReference), for the audit trail and invoicing.
ALTER TABLE credit_events ADD COLUMN order_reference text;
CREATE INDEX credit_events_at ON credit_events (at) WHERE kind = 'session';

-- The remaining hours at or below which the client is told its credit is
-- low (its agreement's lowCreditThreshold); NULL: never.
ALTER TABLE clients ADD COLUMN low_credit_threshold integer CHECK (low_credit_threshold >= 0);

-- +goose Down
ALTER TABLE clients DROP COLUMN low_credit_threshold;
DROP INDEX credit_events_at;
ALTER TABLE credit_events DROP COLUMN order_reference;
