-- Durable two-phase commit and the grid (src/protocol/journal.rs, src/planner/log.rs).

-- The grid the service was started with (`serve --grid` upserts it; a start without --grid
-- loads it). One row for the topology, one per site (PUT /v1/sites/{id} updates it).
CREATE TABLE topology (
    id          smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    nodes       jsonb NOT NULL,
    links       jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE sites (
    id          text PRIMARY KEY,
    site        jsonb NOT NULL,
    seq         bigserial NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Participants' holds and reservations (the journal): one row per hold, whose state follows
-- protocol::HoldBook. Calendars are rebuilt at start from the rows that are committed or held
-- with a lease still running.
CREATE TABLE reservations (
    hold         uuid PRIMARY KEY,
    -- `site:ID` or `network` (protocol::ParticipantRef).
    participant  text NOT NULL,
    txn          uuid NOT NULL,
    -- The plan whose decision wrote this row (all-in-one deployment); NULL for holds
    -- journaled by a participant.
    plan_id      uuid,
    -- The prepare message (protocol::HoldRequest) as JSON.
    request      jsonb NOT NULL,
    start_at     timestamptz NOT NULL,
    end_at       timestamptz NOT NULL,
    state        text NOT NULL CHECK (state IN ('held', 'committed', 'aborted', 'expired', 'released')),
    -- The lease end while held.
    expires_at   timestamptz,
    -- Made through POST /v1/sites/{id}/holds or POST /v1/network/holds.
    via_api      boolean NOT NULL DEFAULT false,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reservations_live ON reservations (participant) WHERE state IN ('held', 'committed');
CREATE INDEX reservations_lease ON reservations (expires_at) WHERE state = 'held';
CREATE INDEX reservations_plan ON reservations (plan_id) WHERE plan_id IS NOT NULL;

-- The coordinators' decision log: a row is written before any commit is sent; finished_at
-- once phase 2 ended. Rows with finished_at NULL are in doubt and finished at start.
CREATE TABLE transactions (
    txn          uuid PRIMARY KEY,
    plan_id      uuid NOT NULL,
    decision     text NOT NULL CHECK (decision = 'commit'),
    -- Vec<planner::log::DecidedPart> as JSON.
    parts        jsonb NOT NULL,
    -- The committed outcome (model::Outcome) as JSON.
    outcome      jsonb NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    result       text CHECK (result IN ('committed', 'compensated'))
);
CREATE INDEX transactions_in_doubt ON transactions (decided_at) WHERE finished_at IS NULL;

-- When an idempotency key was claimed: a claim whose request died with its process is
-- taken over after a time limit.
ALTER TABLE idempotency_keys ADD COLUMN claimed_at timestamptz NOT NULL DEFAULT now();
