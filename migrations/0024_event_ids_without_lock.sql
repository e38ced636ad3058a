-- Event ids in commit order without a lock held to commit (docs/protocol.md, "Plan states and
-- events").
--
-- Until now every event took its id from the one row of plan_event_counter, whose row lock the
-- writing transaction held to its end, and every event sent pg_notify from the trigger, whose
-- queue lock PostgreSQL also holds from before the commit record to its end: every plan write
-- committed one after another, each WAL flush on every other's critical path, and no group
-- commit across them.
--
-- Now an event's id is its writing transaction's id (`pg_current_xact_id()`, xid8) times 2^20
-- plus its place among that transaction's events (1, 2, ...; a transaction-local setting
-- counts them). Writers take no shared row and send no notification. Readers read only the
-- ids below the watermark, `plan_event_watermark()`: the oldest transaction still running
-- (`pg_snapshot_xmin(pg_current_snapshot())`) times 2^20. Every transaction with a smaller xid
-- has ended, so no event can appear below the watermark later: a reader that has read up to
-- id N never sees a smaller id appear (a Last-Event-ID resume loses nothing and repeats
-- nothing), as with the counter. The wake-up of readers moved to the application
-- (src/store/postgres/events.rs): the writing process signals its own readers and notifies the
-- others once the new events are readable, in a transaction of its own that holds no lock
-- over anybody's commit.
--
-- The ids the counter handed out (1, 2, ...) stay as they are; every new id is larger (checked
-- below), so a client's Last-Event-ID from before this migration resumes exactly.

CREATE FUNCTION plan_event_watermark() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 20
$$;

DO $$
BEGIN
    IF (SELECT last_id FROM plan_event_counter) >= (pg_current_xact_id()::text::bigint << 20) THEN
        RAISE EXCEPTION 'plan_event_counter is ahead of the new event ids';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION plan_event(p plans, what text, part text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n integer := COALESCE(NULLIF(current_setting('coreserve.events_in_txn', true), ''), '0')::integer + 1;
BEGIN
    IF n >= 1048576 THEN
        RAISE EXCEPTION 'a transaction writes at most 1048575 plan events';
    END IF;
    PERFORM set_config('coreserve.events_in_txn', n::text, true);
    INSERT INTO plan_events (id, plan_id, owner, "user", request_id, status, outcome, kind, part)
        VALUES ((pg_current_xact_id()::text::bigint << 20) + n, p.id, p.owner, p."user", p.request_id,
                p.status, p.outcome, what, part);
END $$;

DROP TABLE plan_event_counter;
