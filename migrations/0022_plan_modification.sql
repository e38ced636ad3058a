-- Plan modification (src/planner/modify.rs; docs/protocol.md, "Modification").
--
-- A modification is a transaction of its own over the plan it changes: its decision row says
-- so (`kind`), and carries the plan's bookings as they are once it is committed, so that the
-- end of a remote modification (or its recovery) can rewrite the plan from the row alone.
ALTER TABLE transactions
    ADD COLUMN kind text NOT NULL DEFAULT 'plan' CHECK (kind IN ('plan', 'modification')),
    ADD COLUMN bookings jsonb;

-- Each committed modification of a plan counts one revision; it is the `plan.modified` event.
ALTER TABLE plans ADD COLUMN revision integer NOT NULL DEFAULT 0;
ALTER TABLE plan_events ADD COLUMN kind text;

CREATE OR REPLACE FUNCTION plans_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    next bigint;
    what text;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.revision IS DISTINCT FROM NEW.revision THEN
        what := 'plan.modified';
    ELSIF TG_OP = 'UPDATE' AND OLD.status = NEW.status
       AND NOT (NEW.status = 'broken' AND OLD.outcome IS DISTINCT FROM NEW.outcome) THEN
        RETURN NULL;
    END IF;
    UPDATE plan_event_counter SET last_id = last_id + 1 RETURNING last_id INTO next;
    INSERT INTO plan_events (id, plan_id, owner, "user", request_id, status, outcome, kind)
        VALUES (next, NEW.id, NEW.owner, NEW."user", NEW.request_id, NEW.status, NEW.outcome, what);
    PERFORM pg_notify('coreserve_events', next::text);
    RETURN NULL;
END $$;
DROP TRIGGER plans_event ON plans;
CREATE TRIGGER plans_event AFTER INSERT OR UPDATE OF status, outcome, revision ON plans
    FOR EACH ROW EXECUTE FUNCTION plans_event();
