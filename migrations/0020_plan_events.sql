-- Plan states through time and the durable event log (docs/protocol.md, "Plan states and
-- events").
--
-- A committed plan becomes 'active' at its first job's start and 'completed' at its last job's
-- end (Store::advance_plans, run every second by each planning process). The window is kept in
-- two columns that a trigger computes from the outcome, so that every writer of plans fills
-- them alike.
ALTER TABLE plans ADD COLUMN first_start timestamptz, ADD COLUMN last_end timestamptz;

CREATE FUNCTION plans_window() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT min((j->>'start')::timestamptz), max((j->>'end')::timestamptz)
      INTO NEW.first_start, NEW.last_end
      FROM jsonb_array_elements(COALESCE(NEW.outcome->'jobs', '[]'::jsonb)) AS j;
    RETURN NEW;
END $$;
CREATE TRIGGER plans_window BEFORE INSERT OR UPDATE OF outcome ON plans
    FOR EACH ROW EXECUTE FUNCTION plans_window();
UPDATE plans SET outcome = outcome;
CREATE INDEX plans_in_time ON plans (status, first_start) WHERE status IN ('committed', 'active');

-- Every change of a plan's status (and every new broken part of a broken plan) is one event,
-- written by a trigger in the transaction of the change: never an event without its change,
-- never a change without its event. Ids come from one counter row, whose lock is held to the
-- end of the writing transaction: ids are handed out in commit order, so a reader that has seen
-- id N never sees a smaller id appear later (Last-Event-ID resumes lose nothing).
CREATE TABLE plan_event_counter (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_id bigint NOT NULL
);
INSERT INTO plan_event_counter VALUES (true, 0);

CREATE TABLE plan_events (
    id bigint PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    plan_id uuid NOT NULL,
    -- The plan's owner (its principal id: whose stream and webhooks get the event) and name.
    owner uuid NOT NULL,
    "user" text NOT NULL,
    request_id text NOT NULL,
    status text NOT NULL,
    -- The plan's outcome at the change (its jobs' and transfers' `broken` say what broke).
    outcome jsonb NOT NULL
);
CREATE INDEX plan_events_by_owner ON plan_events (owner, id);

CREATE FUNCTION plans_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    next bigint;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status
       AND NOT (NEW.status = 'broken' AND OLD.outcome IS DISTINCT FROM NEW.outcome) THEN
        RETURN NULL;
    END IF;
    UPDATE plan_event_counter SET last_id = last_id + 1 RETURNING last_id INTO next;
    INSERT INTO plan_events (id, plan_id, owner, "user", request_id, status, outcome)
        VALUES (next, NEW.id, NEW.owner, NEW."user", NEW.request_id, NEW.status, NEW.outcome);
    -- Delivered at commit, to the processes that stream events (GET /v1/events).
    PERFORM pg_notify('coreserve_events', next::text);
    RETURN NULL;
END $$;
CREATE TRIGGER plans_event AFTER INSERT OR UPDATE OF status, outcome ON plans
    FOR EACH ROW EXECUTE FUNCTION plans_event();
