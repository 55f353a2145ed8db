-- Runs: a workflow id names a chain of runs, one open at a time (an id reused after its run
-- closed, or a run continued as new). The latest run keeps the key every table uses (the
-- qualified workflow id); an earlier run is archived under '@~' || run_id, a key no public or
-- qualified id can take (public ids never start with '@', namespaces never with '~'), and its
-- events, steps and progress follow it by the foreign keys' ON UPDATE CASCADE: one UPDATE of
-- its workflows row moves its journal, once.
ALTER TABLE workflows
    ADD COLUMN run_id text,
    ADD COLUMN chain_id text,  -- the qualified workflow id of the chain, archived or not
    ADD COLUMN run_number bigint NOT NULL DEFAULT 1,
    ADD COLUMN previous_run_id text,
    ADD COLUMN next_run_id text,
    ADD COLUMN request_id text;  -- the start's request id: the same request makes one run
UPDATE workflows SET run_id = gen_random_uuid()::text, chain_id = workflow_id;
ALTER TABLE workflows
    ALTER COLUMN run_id SET NOT NULL,
    ALTER COLUMN run_id SET DEFAULT gen_random_uuid()::text,
    ALTER COLUMN chain_id SET NOT NULL,
    ADD CONSTRAINT workflows_run_id_key UNIQUE (run_id),
    DROP CONSTRAINT workflows_status_check,
    ADD CONSTRAINT workflows_status_check CHECK (status IN (
        'RUNNING', 'WAITING', 'COMPLETED', 'FAILED', 'PARKED', 'CANCELLED', 'TERMINATED',
        'CONTINUED_AS_NEW'));
CREATE UNIQUE INDEX workflows_chain_id_run_number_idx ON workflows (chain_id, run_number);
CREATE UNIQUE INDEX workflows_chain_id_request_id_idx ON workflows (chain_id, request_id)
    WHERE request_id IS NOT NULL;

ALTER TABLE events
    DROP CONSTRAINT events_workflow_id_fkey,
    ADD CONSTRAINT events_workflow_id_fkey FOREIGN KEY (workflow_id)
        REFERENCES workflows (workflow_id) ON UPDATE CASCADE;
ALTER TABLE step_progress
    DROP CONSTRAINT step_progress_workflow_id_fkey,
    ADD CONSTRAINT step_progress_workflow_id_fkey FOREIGN KEY (workflow_id)
        REFERENCES workflows (workflow_id) ON UPDATE CASCADE;
ALTER TABLE step_tasks
    DROP CONSTRAINT step_tasks_workflow_id_fkey,
    ADD CONSTRAINT step_tasks_workflow_id_fkey FOREIGN KEY (workflow_id)
        REFERENCES workflows (workflow_id) ON UPDATE CASCADE;
ALTER TABLE signal_consumptions
    DROP CONSTRAINT signal_consumptions_workflow_id_event_id_fkey,
    ADD CONSTRAINT signal_consumptions_workflow_id_event_id_fkey FOREIGN KEY (workflow_id, event_id)
        REFERENCES events (workflow_id, event_id) ON UPDATE CASCADE;

-- The run each scheduling request is for: the scheduler reopens a task for a newer run and
-- ignores a late request of an older one.
ALTER TABLE outbox ADD COLUMN run_number bigint NOT NULL DEFAULT 1;

-- A signal id is received once per workflow id, across its runs: found by the id, then its run.
CREATE INDEX events_signal_id_idx ON events (signal_id) WHERE signal_id IS NOT NULL;
