-- Builds: every build id a worker declared on a task queue (Hello.build_id), when one of its
-- workers first and last connected there. The newest build with a connected worker is the one
-- first seen last; a rollback to an older build is a new build id, or the newer one's workers
-- stopped.
CREATE TABLE builds (
    task_queue text NOT NULL,  -- qualified
    build_id text NOT NULL,
    namespace text NOT NULL,
    workflow_types text[] NOT NULL DEFAULT '{}',
    first_seen_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (task_queue, build_id)
);
CREATE INDEX builds_namespace_idx ON builds (namespace);
-- Routing policies per workflow type of a namespace; a type with no row is unversioned (any
-- worker serving it).
CREATE TABLE workflow_policies (
    namespace text NOT NULL,
    workflow_type text NOT NULL,
    policy text NOT NULL CHECK (policy IN ('pinned', 'auto-upgrade')),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, workflow_type)
);
-- The build a run's workflow task was first granted to: the build that started the run, which
-- a pinned type's run stays on. NULL until the first grant; a newer run of the workflow id
-- starts again with NULL.
ALTER TABLE tasks ADD COLUMN build_id text;
