-- Child workflows. A run that a parent's code started (ctx.child) keeps its parent (the parent's
-- workflow id and run id), the parent's call (its step id) and what the parent's close does to
-- it; the runs that continue its chain inherit all four.
ALTER TABLE workflows
    ADD COLUMN parent_workflow_id text,
    ADD COLUMN parent_run_id text,
    ADD COLUMN parent_step_id text,
    ADD COLUMN parent_close_policy text;
CREATE INDEX workflows_parent_idx ON workflows (parent_workflow_id, parent_run_id)
    WHERE parent_workflow_id IS NOT NULL;

-- CHILD_WORKFLOW_STARTED, CHILD_WORKFLOW_COMPLETED and CHILD_WORKFLOW_FAILED name the child run.
ALTER TABLE events ADD COLUMN child_workflow_id text, ADD COLUMN child_run_id text;
-- A child's outcome is journaled once in its parent's run.
CREATE UNIQUE INDEX events_workflow_id_child_outcome_idx ON events (workflow_id, step_id)
    WHERE position IS NULL AND event_type IN ('CHILD_WORKFLOW_COMPLETED', 'CHILD_WORKFLOW_FAILED');

-- What a run's change owes its relatives, written in the change's own transaction (the trigger
-- below) and carried out after it commits (children.py), each exactly once, whatever crashes:
--   child_closed   the run, a child, closed for good: its outcome goes to its parent's journal
--   parent_closed  the run closed: its open children get their parent-close policy
--   cancel         the run's cancellation was requested: so is its open children's
-- A run continued as new is no child's close (its chain goes on), a parked run neither (it may
-- be resumed).
CREATE TABLE child_notices (
    id          bigserial PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('child_closed', 'parent_closed', 'cancel')),
    chain_id    text NOT NULL,
    run_id      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Called only on a close or a new cancel request (the trigger's WHEN), never on the hot path of
-- loads and suspends.
CREATE FUNCTION note_relatives() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    children boolean := EXISTS (
        SELECT FROM history.workflows c
        WHERE c.parent_workflow_id = NEW.chain_id AND c.parent_run_id = NEW.run_id
          AND c.status IN ('RUNNING', 'WAITING'));
BEGIN
    IF NEW.status NOT IN ('RUNNING', 'WAITING') THEN
        IF NEW.status = 'PARKED' THEN
            RETURN NULL;
        END IF;
        IF NEW.parent_workflow_id IS NOT NULL AND NEW.status <> 'CONTINUED_AS_NEW' THEN
            INSERT INTO history.child_notices (kind, chain_id, run_id)
            VALUES ('child_closed', NEW.chain_id, NEW.run_id);
        END IF;
        IF children THEN
            INSERT INTO history.child_notices (kind, chain_id, run_id)
            VALUES ('parent_closed', NEW.chain_id, NEW.run_id);
        END IF;
    ELSIF children THEN
        INSERT INTO history.child_notices (kind, chain_id, run_id)
        VALUES ('cancel', NEW.chain_id, NEW.run_id);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER workflows_relatives AFTER UPDATE OF status, cancel_requested ON workflows
    FOR EACH ROW WHEN (
        OLD.status IN ('RUNNING', 'WAITING') AND NEW.status NOT IN ('RUNNING', 'WAITING')
        OR NEW.cancel_requested AND NOT OLD.cancel_requested)
    EXECUTE FUNCTION note_relatives();
