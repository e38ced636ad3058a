-- Lighter decision writes (issue 13): every committed plan of the all-in-one service writes
-- its plan, its decision and one reservation row per part in one statement.
--
-- reservations_live indexed `participant` for a lookup no statement makes (the journal is
-- read back whole at start: `state = 'committed' OR state = 'held' AND expires_at > $1`), and
-- cost one index entry per reservation row, i.e. per part of every plan.
DROP INDEX IF EXISTS reservations_live;

-- The JSON records of a plan (its outcome, its decision's parts) are over TOAST's 2 kB
-- threshold and are compressed on every insert; lz4 does that at a fraction of pglz's CPU.
-- Only where the server was built with lz4 (else the columns keep the default, pglz).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE plans ALTER COLUMN outcome SET COMPRESSION lz4, ALTER COLUMN bookings SET COMPRESSION lz4;
        ALTER TABLE transactions ALTER COLUMN parts SET COMPRESSION lz4, ALTER COLUMN outcome SET COMPRESSION lz4;
        ALTER TABLE reservations ALTER COLUMN request SET COMPRESSION lz4;
    END IF;
END
$$;
