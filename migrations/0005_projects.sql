-- Planned-Use fair share (issue 10): a project's allocation and members, as the API's JSON
-- (`fairshare::Project`). Usage is not stored: it is the committed plans of the members.
CREATE TABLE projects (
    id text PRIMARY KEY,
    project jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
