-- A run's status change is also announced on a channel of its own, 'perdure_run_status', with
-- the run's key: a caller waiting for a result (GetWorkflowResult) is woken by the run's
-- status alone, not by each of the events its run appends (commit_feed.py). The notification
-- on 'perdure_run' stays, for the watchers of everything a run commits.
CREATE OR REPLACE FUNCTION notify_run_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('perdure_run', NEW.workflow_id);
    PERFORM pg_notify('perdure_run_status', NEW.workflow_id);
    IF OLD.workflow_id <> NEW.workflow_id THEN
        PERFORM pg_notify('perdure_run', OLD.workflow_id);
        PERFORM pg_notify('perdure_run_status', OLD.workflow_id);
    END IF;
    RETURN NULL;
END $$;
