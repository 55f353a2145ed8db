-- Sticky execution: the worker process (its Hello.sticky_id) that keeps a run's state after
-- its last workflow task (TaskDone.sticky). The run's next task goes to that worker first, and
-- to any other once it has been due for the sticky timeout. NULL: any worker.
ALTER TABLE tasks ADD COLUMN sticky_id text;
CREATE INDEX tasks_sticky_id_idx ON tasks (sticky_id) WHERE sticky_id IS NOT NULL;
