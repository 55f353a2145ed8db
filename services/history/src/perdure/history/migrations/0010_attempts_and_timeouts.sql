-- Crash loops and time limits.
-- A load that finds no new event since the previous load means the previous holder recorded
-- nothing: idle_loads counts such loads in a row (loaded_event_count is the journal's length
-- at the last load), and a run whose code crashes its worker again and again is parked.
ALTER TABLE workflows ADD COLUMN idle_loads integer NOT NULL DEFAULT 0;
ALTER TABLE workflows ADD COLUMN loaded_event_count bigint NOT NULL DEFAULT 0;
-- The run fails (ExecutionTimeout) once this passes; NULL: no limit.
ALTER TABLE workflows ADD COLUMN deadline timestamptz;
CREATE INDEX workflows_open_deadline_idx ON workflows (deadline)
    WHERE deadline IS NOT NULL AND status IN ('RUNNING', 'WAITING');
-- A remote step's heartbeat timeout, per attempt; NULL: none.
ALTER TABLE step_tasks ADD COLUMN heartbeat_timeout_seconds float8;
