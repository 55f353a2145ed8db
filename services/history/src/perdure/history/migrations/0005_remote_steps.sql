-- Remote steps (ctx.call): the call is a STEP_SCHEDULED event at its position; its attempts
-- and its outcome follow without one, recorded by the worker that holds the step's own task.
-- Each remote step has its own fence mark, raised by the step task that executes it, apart
-- from the workflow's: a step task never fences out the workflow's lease, nor the reverse.
CREATE TABLE step_tasks (
    workflow_id     text NOT NULL REFERENCES workflows (workflow_id),
    step_id         text NOT NULL,
    step_type       text NOT NULL,
    task_queue      text NOT NULL,
    input           jsonb NOT NULL,
    retry           jsonb NOT NULL,      -- the RetryPolicy message, as JSON
    timeout_seconds float8,              -- per attempt; NULL: no limit
    fence           bigint NOT NULL DEFAULT 0,
    closed          boolean NOT NULL DEFAULT false,  -- its outcome is recorded
    PRIMARY KEY (workflow_id, step_id)
);

ALTER TABLE events ADD COLUMN task_queue text;  -- STEP_SCHEDULED: where the step runs
-- A step task to make due (workflow_type then holds the step type); NULL: a workflow task.
ALTER TABLE outbox ADD COLUMN step_id text;

-- A remote step's outcome is recorded once.
CREATE UNIQUE INDEX events_workflow_id_remote_outcome_idx ON events (workflow_id, step_id)
    WHERE position IS NULL AND event_type IN ('STEP_COMPLETED', 'STEP_FAILED');
