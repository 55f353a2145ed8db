-- Waiting is state: suspended runs, cancellation, termination, signals, timers, retries,
-- published state and step progress.
ALTER TABLE workflows DROP CONSTRAINT workflows_status_check;
ALTER TABLE workflows ADD CONSTRAINT workflows_status_check CHECK (status IN (
    'RUNNING', 'WAITING', 'COMPLETED', 'FAILED', 'PARKED', 'CANCELLED', 'TERMINATED'));
ALTER TABLE workflows
    ADD COLUMN wait_kind text,          -- TIMER, SIGNAL or RETRY while status is WAITING
    ADD COLUMN wait_name text,
    ADD COLUMN wait_until timestamptz,
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

ALTER TABLE events
    ADD COLUMN due_at timestamptz,      -- retry time or timer fire time
    ADD COLUMN name text,               -- signal name or state key
    ADD COLUMN signal_id text,
    ADD COLUMN consumed bigint[],       -- SIGNAL_RECEIVED event ids taken by SIGNAL_CONSUMED
    ADD COLUMN started_at timestamptz,  -- when a step attempt started (worker clock)
    ADD COLUMN wait jsonb;              -- what a WORKFLOW_SUSPENDED run waits for

-- Failed attempts share their step's id, so only the calls that hold a position (outcomes,
-- timers, signal consumptions, state updates, cancellation deliveries) are unique by step id.
DROP INDEX events_workflow_id_step_id_idx;
CREATE UNIQUE INDEX events_workflow_id_step_id_idx ON events (workflow_id, step_id)
    WHERE position IS NOT NULL;
-- A signal id is accepted once per run.
CREATE UNIQUE INDEX events_workflow_id_signal_id_idx ON events (workflow_id, signal_id)
    WHERE signal_id IS NOT NULL;

-- The last heartbeat of a step attempt: progress, not journal; kept for the next attempt.
CREATE TABLE step_progress (
    workflow_id text NOT NULL REFERENCES workflows (workflow_id),
    step_id     text NOT NULL,
    attempt     int NOT NULL,
    details     jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, step_id)
);
