-- The run of its workflow id a task is for (history's run_number): a request for a newer run
-- reopens the task, even closed; a late one for an older run changes nothing.
ALTER TABLE tasks ADD COLUMN run_number bigint NOT NULL DEFAULT 1;
