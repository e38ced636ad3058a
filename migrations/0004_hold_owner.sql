-- Per-principal holds (issue 8): the principal (the `user` of the API token) that prepared a
-- hold through a participant's HTTP endpoints. Only that principal, or an admin, may commit,
-- abort, release or extend it there. NULL: written by the all-in-one's own planners with their
-- decision, or journaled before this migration.
ALTER TABLE reservations ADD COLUMN owner text;
