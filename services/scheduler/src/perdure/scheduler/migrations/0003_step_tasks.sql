-- Step tasks: a remote step of a workflow (ctx.call) is a task of its own, with its own lease
-- and fence, keyed by (workflow_id, step_id); step_id is '' for the workflow's own task. For a
-- step task, workflow_type holds the step type.
ALTER TABLE tasks ADD COLUMN step_id text NOT NULL DEFAULT '';
ALTER TABLE tasks DROP CONSTRAINT tasks_pkey;
ALTER TABLE tasks ADD PRIMARY KEY (workflow_id, step_id);
