-- Where each run (and schedule) lives, recorded the first time the gateway places or finds
-- it: a run stays in the cell it started in, whatever cells are added later.
CREATE TABLE placements (
    namespace text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('run', 'schedule', 'start_key')),
    key text NOT NULL,  -- the workflow id, the schedule id, or the start's debounce or singleton key
    cell text NOT NULL,
    placed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, kind, key)
);
