-- A Slurm site's drift names a hold; the planners find its plan by the hold among the plan's
-- bookings (Store::plan_of_hold: bookings @> '[{"hold": ...}]'). A plan's status may now also
-- be 'broken' (a participant can no longer honour one of its reservations).
CREATE INDEX plans_bookings ON plans USING gin (bookings jsonb_path_ops);
