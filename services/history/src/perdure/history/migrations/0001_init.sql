-- One row per workflow run; `fence` is the highest fencing token seen (the fence mark).
CREATE TABLE workflows (
    workflow_id   text PRIMARY KEY,
    run_seq       bigserial NOT NULL UNIQUE,
    workflow_type text NOT NULL,
    task_queue    text NOT NULL,
    status        text NOT NULL CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'PARKED')),
    input         jsonb NOT NULL,
    result        jsonb,
    failure       jsonb,
    fence         bigint NOT NULL DEFAULT 0,
    event_count   bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    closed_at     timestamptz
);
CREATE INDEX workflows_status_run_seq_idx ON workflows (status, run_seq);
CREATE INDEX workflows_workflow_type_run_seq_idx ON workflows (workflow_type, run_seq);

-- The append-only journal; event_id counts from 1 per workflow without gaps.
CREATE TABLE events (
    workflow_id text NOT NULL REFERENCES workflows (workflow_id),
    event_id    bigint NOT NULL,
    event_type  text NOT NULL,
    fence       bigint NOT NULL,
    step_id     text,
    step_name   text,
    position    bigint,
    attempt     int,
    payload     jsonb,
    failure     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, event_id)
);
-- A step's outcome is recorded once, at one position of the code's call order.
CREATE UNIQUE INDEX events_workflow_id_step_id_idx ON events (workflow_id, step_id)
    WHERE step_id IS NOT NULL;
CREATE UNIQUE INDEX events_workflow_id_position_idx ON events (workflow_id, position)
    WHERE position IS NOT NULL;

-- Scheduling requests, committed with the journal change that caused them and relayed to the
-- scheduler afterwards; run_at NULL means "now".
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    workflow_id   text NOT NULL,
    workflow_type text NOT NULL,
    task_queue    text NOT NULL,
    run_at        timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
