-- +goose Up

-- A client holds a credit allocation under a written order. consumed_hours
-- only grows, by one per session opened, never past allocated_hours at the
-- time of opening (docs/design.md#92-invariants).
CREATE TABLE clients (
    client_id       text PRIMARY KEY,
    allocated_hours integer     NOT NULL CHECK (allocated_hours >= 0),
    consumed_hours  integer     NOT NULL DEFAULT 0 CHECK (consumed_hours >= 0),
    valid_until     timestamptz,
    source          text        NOT NULL,  -- who provisions it: "cli" or "ClientAgreement ns/name"
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

-- Only the SHA-256 of an API key is stored.
CREATE TABLE api_keys (
    key_sha256 bytea       PRIMARY KEY CHECK (length(key_sha256) = 32),
    client_id  text        NOT NULL REFERENCES clients,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX api_keys_active ON api_keys (client_id) WHERE revoked_at IS NULL;

-- Session tokens are derived from the id with the token key named by
-- token_key_id; the token itself is never stored. Rows are kept for audit.
CREATE TABLE sessions (
    id              text        PRIMARY KEY CHECK (id ~ '^sess_[a-f0-9]{24}$'),
    client_id       text        NOT NULL REFERENCES clients,
    idempotency_key text        NOT NULL,
    issued_at       timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    token_key_id    text        NOT NULL,
    UNIQUE (client_id, idempotency_key)
);
CREATE INDEX sessions_client_expires ON sessions (client_id, expires_at);

-- Append-only: one row per allocation change and per session opened.
CREATE TABLE credit_events (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id       text        NOT NULL REFERENCES clients,
    at              timestamptz NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('allocation', 'session')),
    allocated_delta integer     NOT NULL DEFAULT 0,
    consumed_delta  integer     NOT NULL DEFAULT 0,
    session_id      text        REFERENCES sessions,
    source          text        NOT NULL
);
CREATE INDEX credit_events_client ON credit_events (client_id, at);

-- +goose StatementBegin
CREATE FUNCTION credit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'credit_events is append-only';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER credit_events_append_only BEFORE UPDATE OR DELETE ON credit_events
    FOR EACH ROW EXECUTE FUNCTION credit_events_append_only();

-- The result of a metrics request, replayed byte for byte for a retry with
-- the same Idempotency-Key; kept at least 24 h, then pruned.
CREATE TABLE metrics_requests (
    client_id       text        NOT NULL REFERENCES clients,
    idempotency_key text        NOT NULL,
    request_sha256  bytea       NOT NULL CHECK (length(request_sha256) = 32),
    metrics         bytea       NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (client_id, idempotency_key)
);
CREATE INDEX metrics_requests_created ON metrics_requests (created_at);

-- +goose Down
DROP TABLE metrics_requests;
DROP TRIGGER credit_events_append_only ON credit_events;
DROP FUNCTION credit_events_append_only();
DROP TABLE credit_events;
DROP TABLE sessions;
DROP TABLE api_keys;
DROP TABLE clients;
