-- The broker's own state (src/store): plans, idempotency keys, API tokens.
-- Participants' holds and reservations are not here (yet).

CREATE TABLE plans (
    id            uuid PRIMARY KEY,
    "user"        text NOT NULL,
    request_id    text NOT NULL,
    status        text NOT NULL,
    created_at    timestamptz NOT NULL,
    cancelled_at  timestamptz,
    -- The plan's start (outcome.start), for the from/to filter; NULL when rejected.
    start         timestamptz,
    -- The planner's outcome (model::Outcome) as JSON.
    outcome       jsonb NOT NULL,
    -- What to release on cancel (Vec<planner::Booking>) as JSON.
    bookings      jsonb NOT NULL,
    -- Insertion order: listing is oldest first.
    seq           bigserial NOT NULL
);
CREATE INDEX plans_user_seq ON plans ("user", seq);

CREATE TABLE idempotency_keys (
    "user"       text NOT NULL,
    key          text NOT NULL,
    -- NULL while the first request with this key is being planned.
    plan_id      uuid,
    fingerprint  text,
    PRIMARY KEY ("user", key)
);

CREATE TABLE tokens (
    hash        text PRIMARY KEY,
    "user"      text NOT NULL,
    admin       boolean NOT NULL,
    service     boolean NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
