-- The workflow's trace context for the spans of its grants, and what a timed due time waits
-- for (timer, signal timeout, retry; NULL when due at once).
ALTER TABLE tasks
    ADD COLUMN trace_context jsonb,
    ADD COLUMN due_reason text;
