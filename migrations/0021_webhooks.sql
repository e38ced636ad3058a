-- Webhooks (src/api/webhooks.rs): where a user's plan events are POSTed, signed, in order, at
-- least once. `cursor` is the id of the last event the receiver acknowledged (2xx); a process
-- delivers a webhook only while it holds its lease (lease_owner, lease_until), so two planners
-- never deliver the same webhook at once.
CREATE TABLE webhooks (
    id              uuid PRIMARY KEY,
    -- The owner: its principal id (whose events it gets) and name.
    owner           uuid NOT NULL,
    "user"          text NOT NULL,
    admin           boolean NOT NULL,
    url             text NOT NULL,
    secret          text NOT NULL,
    created_at      timestamptz NOT NULL,
    enabled         boolean NOT NULL,
    cursor          bigint NOT NULL,
    attempts        integer NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    failing_since   timestamptz,
    last_error      text,
    lease_owner     text,
    lease_until     timestamptz,
    seq             bigserial NOT NULL
);
CREATE INDEX webhooks_by_owner ON webhooks (owner, seq);
CREATE INDEX webhooks_due ON webhooks (next_attempt_at) WHERE enabled;

-- Each webhook's delivery log: the newest 100 attempts.
CREATE TABLE webhook_deliveries (
    seq         bigserial PRIMARY KEY,
    webhook_id  uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id    bigint NOT NULL,
    at          timestamptz NOT NULL,
    attempt     integer NOT NULL,
    status_code integer,
    error       text,
    duration_ms double precision NOT NULL
);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, seq DESC);
