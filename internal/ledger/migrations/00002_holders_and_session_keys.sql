-- +goose Up

-- The ClientAgreement that holds a client (its UID and namespace/name), so
-- that PostgreSQL, not a list of agreements, decides which of two agreements
-- naming one clientID provisions it. NULL: no agreement holds it (created by
-- `evalmeter clients grant`, or its agreement was deleted).
ALTER TABLE clients
    ADD COLUMN holder_uid  text,
    ADD COLUMN holder_name text,
    ADD CONSTRAINT clients_holder CHECK ((holder_uid IS NULL) = (holder_name IS NULL));

-- The API key that opened a session, so that revoking the key ends the
-- session; and when it was ended. NULL key: opened before this migration.
ALTER TABLE sessions
    ADD COLUMN key_sha256 bytea REFERENCES api_keys,
    ADD COLUMN ended_at   timestamptz;
CREATE INDEX sessions_key ON sessions (key_sha256) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX sessions_key;
ALTER TABLE sessions DROP COLUMN ended_at, DROP COLUMN key_sha256;
ALTER TABLE clients DROP CONSTRAINT clients_holder, DROP COLUMN holder_name, DROP COLUMN holder_uid;
