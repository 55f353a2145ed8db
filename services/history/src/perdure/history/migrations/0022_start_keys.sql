-- Keyed starts (start_keys.py). Debounce: a start with a key joins the namespace's pending run
-- of that key (never loaded, due at debounce_until, not yet passed), which takes its input and
-- a later due time. Singleton: at most one open run per key; a start while one is open returns
-- it. Starts with one key are serialized by an advisory lock on it, so neither needs a unique
-- index; these indexes find the run.
ALTER TABLE workflows
    ADD COLUMN debounce_key text,
    ADD COLUMN debounce_until timestamptz,
    ADD COLUMN singleton_key text;
CREATE INDEX workflows_debounce_key_idx ON workflows (namespace, debounce_key)
    WHERE debounce_key IS NOT NULL AND loaded_event_count = 0;
CREATE INDEX workflows_singleton_key_idx ON workflows (namespace, singleton_key)
    WHERE singleton_key IS NOT NULL AND status IN ('RUNNING', 'WAITING');
