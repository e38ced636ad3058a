-- Allocation limits exact across planner processes (issue 28).
--
-- A charge is a committed plan's usage against its user's project: one row, written in the
-- same database transaction as the plan's decision (src/store/postgres.rs, record_decision),
-- after the project's row in `projects` was locked (SELECT ... FOR UPDATE) and the project's
-- live charges in the periods the plan runs in were summed against its allocation. Two
-- planner processes that charge one project are thus serialised by the lock, and the sum
-- they check includes every charge committed before: the limit is exact, whatever process
-- books. A compensated (rejected) or cancelled plan's charge is released (`released_at`).
-- The in-memory fair-share ledger (src/fairshare) is a cache of this for priorities.
CREATE TABLE allocation_charges (
    plan_id      uuid PRIMARY KEY,
    project      text NOT NULL,
    -- [{"start": unix s, "end": unix s, "cpus": n, "gpus": n}, ...]: the plan's jobs.
    usage        jsonb NOT NULL,
    -- The earliest start and latest end of `usage`, to find the charges of a period.
    first_start  timestamptz NOT NULL,
    last_end     timestamptz NOT NULL,
    charged_at   timestamptz NOT NULL DEFAULT now(),
    released_at  timestamptz
);
CREATE INDEX allocation_charges_live ON allocation_charges (project, last_end) WHERE released_at IS NULL;

-- Committed plans booked before this migration are charged to their user's project now (the
-- one whose members name the user, else the one named like the user); their usage is their
-- jobs'.
INSERT INTO allocation_charges (plan_id, project, usage, first_start, last_end)
SELECT p.id,
       COALESCE((SELECT pr.id FROM projects pr WHERE pr.project->'members' @> to_jsonb(p."user") LIMIT 1), p."user"),
       u.usage, u.first_start, u.last_end
FROM plans p
CROSS JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object(
               'start', extract(epoch FROM (j->>'start')::timestamptz)::bigint,
               'end', extract(epoch FROM (j->>'end')::timestamptz)::bigint,
               'cpus', (j->>'cpus')::bigint,
               'gpus', COALESCE((j->'gpus'->>'count')::bigint, 0))) AS usage,
           min((j->>'start')::timestamptz) AS first_start,
           max((j->>'end')::timestamptz) AS last_end
    FROM jsonb_array_elements(p.outcome->'jobs') AS j
) u
WHERE p.status = 'committed' AND u.usage IS NOT NULL;
