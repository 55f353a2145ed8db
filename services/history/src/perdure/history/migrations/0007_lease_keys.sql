-- The API key whose load set each fence mark ('' without keys): with keys in force, only that
-- key's worker (the one the scheduler granted the lease to) may write under the mark.
ALTER TABLE workflows ADD COLUMN fence_key text NOT NULL DEFAULT '';
ALTER TABLE step_tasks ADD COLUMN fence_key text NOT NULL DEFAULT '';
