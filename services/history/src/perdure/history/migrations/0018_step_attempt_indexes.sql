-- perdure: no transaction
-- What became of one step's attempts (asked by a stream's emit, streams.py, and by a remote
-- step's load, store.LOAD_STEP): its last attempt started and whether it has its outcome, read
-- from the step's own events, not by going through every event of its run. A run of any length
-- costs these questions the same.
--
-- Built CONCURRENTLY: the workers' records go on while an upgrade indexes a large journal. A
-- build cut short leaves an invalid index behind, which the migration's next run drops first.
DROP INDEX CONCURRENTLY IF EXISTS events_step_attempt_started_idx;
CREATE INDEX CONCURRENTLY events_step_attempt_started_idx ON events (workflow_id, step_id, attempt)
    WHERE event_type = 'STEP_ATTEMPT_STARTED';
DROP INDEX CONCURRENTLY IF EXISTS events_step_outcome_idx;
CREATE INDEX CONCURRENTLY events_step_outcome_idx ON events (workflow_id, step_id)
    WHERE event_type IN ('STEP_COMPLETED', 'STEP_FAILED');
