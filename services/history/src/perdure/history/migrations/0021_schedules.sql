-- Schedules: cron or interval specs that start runs (schedules.py). history fires them: a
-- replica locks a due row (FOR UPDATE SKIP LOCKED), starts the slot's run and advances
-- next_fire in one transaction, so each slot starts one run, whichever replica is up.
CREATE TABLE schedules (
    namespace        text NOT NULL,
    schedule_id      text NOT NULL,
    seq              bigserial NOT NULL,         -- creation order, for pages
    cron             text,                       -- a 5-field cron expression (UTC), or
    interval_seconds bigint CHECK (interval_seconds > 0),  -- every so many seconds
    offset_seconds   bigint NOT NULL DEFAULT 0,
    action           bytea NOT NULL,             -- the StartWorkflowRequest each slot sends
    overlap_policy   text NOT NULL
        CHECK (overlap_policy IN ('SKIP', 'BUFFER_ONE', 'ALLOW_ALL', 'CANCEL_OTHER')),
    catchup_seconds  float8 NOT NULL CHECK (catchup_seconds >= 0),
    paused           boolean NOT NULL DEFAULT false,
    note             text NOT NULL DEFAULT '',
    next_fire        timestamptz,                -- the next slot; NULL: it never fires again
    buffered_slot    timestamptz,                -- a slot waiting for the last run to close
    last_workflow_id text,                       -- the last run started (its qualified id)
    action_count     bigint NOT NULL DEFAULT 0,
    skipped_count    bigint NOT NULL DEFAULT 0,
    missed_count     bigint NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, schedule_id),
    CHECK ((cron IS NULL) <> (interval_seconds IS NULL))
);
CREATE UNIQUE INDEX schedules_seq_idx ON schedules (namespace, seq);
CREATE INDEX schedules_next_fire_idx ON schedules (next_fire);
CREATE INDEX schedules_buffered_idx ON schedules (buffered_slot) WHERE buffered_slot IS NOT NULL;

-- The runs each schedule started, one per slot (the key says so); the latest few are kept.
CREATE TABLE schedule_actions (
    namespace   text NOT NULL,
    schedule_id text NOT NULL,
    slot        timestamptz NOT NULL,
    workflow_id text NOT NULL,                   -- qualified
    run_id      text NOT NULL,
    triggered   boolean NOT NULL DEFAULT false,
    started_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, schedule_id, slot),
    FOREIGN KEY (namespace, schedule_id) REFERENCES schedules ON DELETE CASCADE
);
