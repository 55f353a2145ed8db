-- Pauses: while a row stands, no task it holds is granted (grants.py, pauses.py). `name` is as
-- the platform stores it: a workflow id or task queue qualified by its namespace, a workflow
-- type as declared (types are keyed with their namespace, as routing policies are).
CREATE TABLE pauses (
    namespace text NOT NULL,
    scope text NOT NULL CHECK (scope IN ('workflow', 'workflow_type', 'task_queue')),
    name text NOT NULL,
    reason text NOT NULL DEFAULT '',
    paused_by text NOT NULL DEFAULT '',
    paused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, scope, name)
);
