-- Claims with owners and leases (src/store/mod.rs, `Claim`): an idempotency key and a decided
-- transaction are each worked on by one claim at a time. The claiming process renews the lease
-- every few seconds while it works; once `lease_until` has passed, any process may take over
-- (a new `claim`), and writes under the old claim find nothing to update.

ALTER TABLE idempotency_keys
    ADD COLUMN claim        uuid,
    ADD COLUMN owner        text,
    ADD COLUMN lease_until  timestamptz NOT NULL DEFAULT now();

ALTER TABLE transactions
    ADD COLUMN claim         uuid,
    ADD COLUMN owner         text,
    ADD COLUMN lease_until   timestamptz NOT NULL DEFAULT now(),
    -- The coordinator gave the transaction up (a part refused its commit): only the
    -- compensation remains. Written before any part is released.
    ADD COLUMN compensating  boolean NOT NULL DEFAULT false;

CREATE INDEX idempotency_keys_claim ON idempotency_keys (claim) WHERE plan_id IS NULL;
CREATE INDEX transactions_claim ON transactions (claim) WHERE finished_at IS NULL;
