-- The build id of the worker that first loaded a run (LoadJournalRequest.build_id): the build
-- that started it, which a pinned type's runs stay on. NULL until a worker has loaded it.
ALTER TABLE workflows ADD COLUMN build_id text;
-- ListBuilds counts open runs per build.
CREATE INDEX workflows_open_build_idx ON workflows (namespace, build_id)
    WHERE build_id IS NOT NULL AND status IN ('RUNNING', 'WAITING');
