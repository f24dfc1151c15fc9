-- +goose Up

-- A key replaced with a grace period is revoked at once (revoked_at) but
-- stays usable until usable_until; NULL: not usable from revoked_at on.
-- Immediate revocation thus never depends on a clock.
ALTER TABLE api_keys ADD COLUMN usable_until timestamptz;
-- Every key of a client, for rotation and deletion (api_keys_active holds
-- only the active ones).
CREATE INDEX api_keys_client ON api_keys (client_id);

-- +goose Down
DROP INDEX api_keys_client;
ALTER TABLE api_keys DROP COLUMN usable_until;
