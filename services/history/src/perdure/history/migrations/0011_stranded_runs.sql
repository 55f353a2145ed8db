-- A run that closes asks the scheduler, through the outbox, to retire its tasks: a closed run is
-- never handed out again.
ALTER TABLE outbox ADD COLUMN closed boolean NOT NULL DEFAULT false;
-- When the stranded-run sweep found the run open with no lease, no task and no wake-up (and
-- made it due again); cleared by the next load. `perdure workflow list --stuck` lists these.
ALTER TABLE workflows ADD COLUMN stuck_since timestamptz;
CREATE INDEX workflows_stuck_idx ON workflows (namespace, run_seq) WHERE stuck_since IS NOT NULL;
-- The sweep reads open runs quiet for a while, oldest first.
CREATE INDEX workflows_open_updated_at_idx ON workflows (updated_at)
    WHERE status IN ('RUNNING', 'WAITING');
