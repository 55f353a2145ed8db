-- Where a run made by a reset or a fork (history/recovery.py) came from: the run whose journal
-- it copied, and how much of it. NULL on every other run.
ALTER TABLE workflows
    ADD COLUMN reset_from_run_id text,
    ADD COLUMN forked_from_workflow_id text,  -- the public workflow id of the source
    ADD COLUMN forked_from_run_id text,
    ADD COLUMN copied_up_to_event_id bigint;
