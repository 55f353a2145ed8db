-- One workflow, one trace: the start's trace context (a W3C carrier) is kept with the run,
-- a signal's with its event, and a timed wake-up says what it waits for.
ALTER TABLE workflows ADD COLUMN trace_context jsonb;
ALTER TABLE events ADD COLUMN trace_context jsonb;
ALTER TABLE outbox ADD COLUMN wake_reason text;
