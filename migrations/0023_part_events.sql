-- Job and transfer events (docs/protocol.md, "Plan states and events").
--
-- Besides its plan's status changes, each job and transfer of a booked plan changes state at
-- its start (`job.running`, `transfer.running`) and at its end (`job.ended`,
-- `transfer.ended`); each such change is one event, written by the plans_event trigger in the
-- transaction that moves the plan's clock (`advanced_to`, set by Store::advance_plans). A
-- broken part has no more events of its own (its `plan.broken` said so).
--
-- `next_boundary` is the earliest start or end of a part not broken after `advanced_to`: the
-- clock's query finds the plans it must move with one index.
ALTER TABLE plans ADD COLUMN advanced_to timestamptz, ADD COLUMN next_boundary timestamptz;
ALTER TABLE plan_events ADD COLUMN part text;

-- The starts and ends of a plan's parts that are not broken, as (at, the event's type, the
-- part's name, an order): at the same instant ends come before starts, jobs before transfers,
-- each in the plan's order. A transfer is named "from->to" (its jobs' names).
CREATE FUNCTION plan_boundaries(outcome jsonb)
    RETURNS TABLE (at timestamptz, kind text, part text, ord bigint)
    LANGUAGE sql STABLE AS $$
    SELECT (p->>'end')::timestamptz, 'job.ended', p->>'name', i
      FROM jsonb_array_elements(COALESCE(outcome->'jobs', '[]'::jsonb)) WITH ORDINALITY AS x(p, i)
     WHERE p->>'broken' IS NULL
    UNION ALL
    SELECT (p->>'end')::timestamptz, 'transfer.ended', (p->>'from') || '->' || (p->>'to'), 1000000 + i
      FROM jsonb_array_elements(COALESCE(outcome->'transfers', '[]'::jsonb)) WITH ORDINALITY AS x(p, i)
     WHERE p->>'broken' IS NULL
    UNION ALL
    SELECT (p->>'start')::timestamptz, 'job.running', p->>'name', 2000000 + i
      FROM jsonb_array_elements(COALESCE(outcome->'jobs', '[]'::jsonb)) WITH ORDINALITY AS x(p, i)
     WHERE p->>'broken' IS NULL
    UNION ALL
    SELECT (p->>'start')::timestamptz, 'transfer.running', (p->>'from') || '->' || (p->>'to'), 3000000 + i
      FROM jsonb_array_elements(COALESCE(outcome->'transfers', '[]'::jsonb)) WITH ORDINALITY AS x(p, i)
     WHERE p->>'broken' IS NULL
$$;

CREATE OR REPLACE FUNCTION plans_window() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT min((j->>'start')::timestamptz), max((j->>'end')::timestamptz)
      INTO NEW.first_start, NEW.last_end
      FROM jsonb_array_elements(COALESCE(NEW.outcome->'jobs', '[]'::jsonb)) AS j;
    SELECT min(b.at) INTO NEW.next_boundary
      FROM plan_boundaries(NEW.outcome) AS b
     WHERE NEW.advanced_to IS NULL OR b.at > NEW.advanced_to;
    RETURN NEW;
END $$;
DROP TRIGGER plans_window ON plans;
CREATE TRIGGER plans_window BEFORE INSERT OR UPDATE OF outcome, advanced_to ON plans
    FOR EACH ROW EXECUTE FUNCTION plans_window();

-- Plans already under way when this migration runs: their past starts and ends are not
-- announced again.
UPDATE plans SET advanced_to = CASE WHEN status IN ('active', 'completed', 'broken', 'cancelled')
                                    THEN now() END;

DROP INDEX plans_in_time;
CREATE INDEX plans_by_next_boundary ON plans (next_boundary)
    WHERE status IN ('committed', 'active', 'broken');

-- One event of plan `p`: `what` its type (NULL: `plan.` and its status), `part` the job or
-- transfer it is about (NULL: the plan).
CREATE FUNCTION plan_event(p plans, what text, part text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    next bigint;
BEGIN
    UPDATE plan_event_counter SET last_id = last_id + 1 RETURNING last_id INTO next;
    INSERT INTO plan_events (id, plan_id, owner, "user", request_id, status, outcome, kind, part)
        VALUES (next, p.id, p.owner, p."user", p.request_id, p.status, p.outcome, what, part);
    -- Delivered at commit, to the processes that stream events (GET /v1/events).
    PERFORM pg_notify('coreserve_events', next::text);
END $$;

-- A plan's event (its status, a new broken part, a modification) and its parts' events, in
-- time order: `plan.active` before the first `job.running`, `plan.completed` after the last
-- `job.ended`. Each event carries the plan's status as it is once that event happened: the
-- parts' events before `plan.completed` still say the status it had.
CREATE OR REPLACE FUNCTION plans_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    what text;
    changed boolean;
    b record;
    before_end plans;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.revision IS DISTINCT FROM NEW.revision THEN
        what := 'plan.modified';
        changed := true;
    ELSE
        changed := TG_OP = 'INSERT' OR OLD.status <> NEW.status
            OR (NEW.status = 'broken' AND OLD.outcome IS DISTINCT FROM NEW.outcome);
    END IF;
    IF changed AND NEW.status <> 'completed' THEN
        PERFORM plan_event(NEW, what, NULL);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.advanced_to IS DISTINCT FROM OLD.advanced_to THEN
        before_end := NEW;
        IF changed AND NEW.status = 'completed' THEN
            before_end.status := OLD.status;
        END IF;
        FOR b IN SELECT * FROM plan_boundaries(NEW.outcome) AS x
                  WHERE (OLD.advanced_to IS NULL OR x.at > OLD.advanced_to) AND x.at <= NEW.advanced_to
                  ORDER BY x.at, x.ord LOOP
            PERFORM plan_event(before_end, b.kind, b.part);
        END LOOP;
    END IF;
    IF changed AND NEW.status = 'completed' THEN
        PERFORM plan_event(NEW, what, NULL);
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER plans_event ON plans;
CREATE TRIGGER plans_event AFTER INSERT OR UPDATE OF status, outcome, revision, advanced_to ON plans
    FOR EACH ROW EXECUTE FUNCTION plans_event();
