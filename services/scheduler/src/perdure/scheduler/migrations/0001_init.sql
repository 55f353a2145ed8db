-- One row per workflow that ever needed a worker. `fence` grows by one with every lease and is
-- never reset, so a fencing token is never reused. run_at NULL: no worker is needed now.
CREATE TABLE tasks (
    workflow_id      text PRIMARY KEY,
    workflow_type    text NOT NULL,
    task_queue       text NOT NULL,
    run_at           timestamptz,
    fence            bigint NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_task_queue_run_at_idx ON tasks (task_queue, run_at)
    WHERE lease_owner IS NULL AND run_at IS NOT NULL;
CREATE INDEX tasks_lease_expires_at_idx ON tasks (lease_expires_at)
    WHERE lease_owner IS NOT NULL;

-- Every workflow type a worker has declared on a queue: starts of other types are refused.
CREATE TABLE workflow_types (
    task_queue    text NOT NULL,
    workflow_type text NOT NULL,
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_queue, workflow_type)
);
