-- Principals and tokens (issue 28).
--
-- `id`: a token's own identifier (shown when it is issued, by GET /v1/whoami), what
-- DELETE /v1/tokens/{id} and `coreserve token revoke` name; the hash stays the lookup key.
-- `planner`: the token acts as a planner of this deployment: the holds it prepares belong to
-- the deployment-wide planner principal `@planners`, which every planner credential may drive
-- (recovery, compensation and cancellation by any planner; docs/protocol.md, "Identity").
-- `expires_at`: refused from then on (NULL: never). `revoked_at`: refused from then on; the
-- row is kept (who had which token, until when), and re-registering the same token (a
-- bootstrap --service-token still in a configuration) does not bring it back.
ALTER TABLE tokens
    ADD COLUMN id          uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN planner     boolean NOT NULL DEFAULT false,
    ADD COLUMN expires_at  timestamptz,
    ADD COLUMN revoked_at  timestamptz;
CREATE UNIQUE INDEX tokens_id ON tokens (id);

-- Every process caches the tokens it has seen; any change of a row (a revocation, a role
-- change, a row deleted by hand) is announced on channel `coreserve_tokens`, and every process
-- that LISTENs drops its cache at once (src/api/state.rs, `AppState::token`).
CREATE FUNCTION coreserve_tokens_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('coreserve_tokens', OLD.hash);
    RETURN NULL;
END
$$;
CREATE TRIGGER tokens_changed AFTER UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION coreserve_tokens_changed();

-- A token issued before names were checked may act under a reserved name without its role
-- (a plain token for user `admin`, or `" admin"` trimmed into it, read and cancelled the
-- admin's plans): revoke those, and any whose name has surrounding whitespace or starts with
-- `@` (no such name can be issued any more; api::auth::check_principal_name). Tokens of the
-- other reserved names (`root`, `system`) impersonate nobody and stay.
UPDATE tokens SET revoked_at = now()
WHERE revoked_at IS NULL
  AND (("user" = 'admin' AND NOT admin)
       OR ("user" = 'service' AND NOT service)
       OR "user" LIKE '@%'
       OR "user" <> btrim("user"));
