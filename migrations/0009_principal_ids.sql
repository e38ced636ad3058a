-- Principals are ids, not display names (issue 28, point 4).
--
-- A principal is a row of `principals`: its `id` is what owns plans and idempotency keys; its
-- `name` is what it is shown as (the JSON fields `user` keep their names and carry it). Every
-- token acts for one principal (`tokens.principal`); the tokens issued for one name act for the
-- same principal (a second token for `alice` is alice's, e.g. for a rotation). A verified client
-- certificate's principal (`--trust-client-certificates`) is not a row here: its id is derived
-- from the certificate's name in a space of its own (api::auth::certificate_principal), so a
-- certificate named `admin` or `alice` is neither the admin nor alice.
CREATE TABLE principals (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Every name that owns something today becomes a principal.
INSERT INTO principals (name)
SELECT "user" FROM tokens
UNION SELECT "user" FROM plans
UNION SELECT "user" FROM idempotency_keys
ON CONFLICT (name) DO NOTHING;

ALTER TABLE tokens ADD COLUMN principal uuid REFERENCES principals (id);
UPDATE tokens t SET principal = p.id FROM principals p WHERE p.name = t."user";
ALTER TABLE tokens ALTER COLUMN principal SET NOT NULL;

-- A plan's owner. No foreign key: a certificate principal owns plans too.
ALTER TABLE plans ADD COLUMN owner uuid;
UPDATE plans pl SET owner = p.id FROM principals p WHERE p.name = pl."user";
ALTER TABLE plans ALTER COLUMN owner SET NOT NULL;
CREATE INDEX plans_owner_seq ON plans (owner, seq);
DROP INDEX plans_user_seq;

-- An idempotency key is the principal's, not the name's.
ALTER TABLE idempotency_keys ADD COLUMN principal uuid;
UPDATE idempotency_keys k SET principal = p.id FROM principals p WHERE p.name = k."user";
ALTER TABLE idempotency_keys ALTER COLUMN principal SET NOT NULL;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (principal, key);
ALTER TABLE idempotency_keys DROP COLUMN "user";
