-- A failed attempt is journaled once: a record sent again (its answer was lost) finds the
-- first, instead of counting as one more attempt.
CREATE UNIQUE INDEX events_workflow_id_step_id_attempt_idx ON events (workflow_id, step_id, attempt)
    WHERE event_type = 'STEP_ATTEMPT_FAILED';
