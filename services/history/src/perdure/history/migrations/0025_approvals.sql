-- Approvals (approvals.py): a run's request for a person's decision, created in the statement
-- that journals its APPROVAL_REQUESTED, decided once (DecideApproval, which journals
-- APPROVAL_DECIDED in its transaction), escalated and expired by history's approval watch on
-- the database clock. The id is fixed by the run and the call's position.
CREATE TABLE approvals (
    approval_id      text PRIMARY KEY,
    seq              bigserial NOT NULL,
    namespace        text NOT NULL,
    run_key          text NOT NULL,       -- history.workflows.workflow_id of the run
    workflow_id      text NOT NULL,       -- the public workflow id (its chain's)
    run_id           text NOT NULL,
    workflow_type    text NOT NULL,
    step_id          text NOT NULL,
    position         bigint NOT NULL,
    name             text NOT NULL,
    details          bytea NOT NULL,
    details_encoding text NOT NULL,
    details_sha256   bytea NOT NULL,
    approvers        text[] NOT NULL,
    escalate_to      text[] NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    escalate_at      timestamptz,
    expires_at       timestamptz NOT NULL,
    escalated_at     timestamptz,
    status           text NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'APPROVED', 'REJECTED', 'EXPIRED')),
    decided_by       text,
    decided_at       timestamptz,
    reason           text
);
CREATE UNIQUE INDEX approvals_seq_idx ON approvals (namespace, seq);
CREATE INDEX approvals_workflow_idx ON approvals (namespace, workflow_id, seq);
CREATE INDEX approvals_run_idx ON approvals (run_key) WHERE status = 'PENDING';
-- What the approval watch looks for: pending approvals due to escalate, or to expire.
CREATE INDEX approvals_escalate_idx ON approvals (escalate_at)
    WHERE status = 'PENDING' AND escalated_at IS NULL AND escalate_at IS NOT NULL;
CREATE INDEX approvals_expire_idx ON approvals (expires_at) WHERE status = 'PENDING';
