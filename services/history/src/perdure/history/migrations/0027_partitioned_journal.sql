-- The journal partitioned by time, so that retention drops whole partitions (retention.py).
--
-- Each run gets a partition key when it is created (workflows.part): the lower bound, in epoch
-- seconds, of the newest journal partition already begun, by the database clock
-- (current_part()). Every row of a run in events and frames carries the run's part, so all
-- the rows of one run are in one partition and every unique index, with part added, keeps
-- its guarantee. A run never fails to start for want of a partition: it takes the newest one
-- that exists, even when the maintenance loop is behind (partitions.py creates them ahead).
--
-- The runs and events written before this migration go to the partition [0, now): it drops
-- once its last run is past its retention, and its expired runs go one by one before that.
-- `dropped`: detached from the journal, its tables and runs' rows being deleted (retention.py).
CREATE TABLE journal_partitions (
    lo      bigint PRIMARY KEY,  -- epoch seconds, inclusive; the tables events_<lo>, frames_<lo>
    hi      bigint NOT NULL,     -- exclusive
    dropped boolean NOT NULL DEFAULT false,
    CHECK (hi > lo)
);

CREATE FUNCTION current_part() RETURNS bigint LANGUAGE sql STABLE AS $$
SELECT max(lo) FROM history.journal_partitions
WHERE lo <= extract(epoch FROM now()) AND NOT dropped
$$;

ALTER TABLE workflows ADD COLUMN part bigint NOT NULL DEFAULT 0;
ALTER TABLE workflows ALTER COLUMN part SET DEFAULT history.current_part();
-- Retention's reads of a partition's runs: the open and latest closed first (the ones that
-- hold it), the oldest closed from the other end (the first to expire).
CREATE INDEX workflows_part_idx ON workflows (part, closed_at DESC NULLS FIRST);

-- A payload stored by content is kept while a partition that may reference it is: the runs
-- that reference it are in partitions from first_part to last_part (widened by every
-- reference from outside the range).
ALTER TABLE payloads
    ADD COLUMN first_part bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_part bigint NOT NULL DEFAULT 0;
CREATE INDEX payloads_first_part_idx ON payloads (first_part);

-- Retention per namespace, in seconds ('Infinity': forever); PERDURE_RETENTION without a row.
CREATE TABLE namespace_retention (
    namespace  text PRIMARY KEY,
    seconds    double precision NOT NULL CHECK (seconds > 0),
    updated_by text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE
    upto bigint := floor(extract(epoch FROM now()))::bigint + 1;
BEGIN
    CREATE TABLE events_new (LIKE events INCLUDING DEFAULTS, part bigint NOT NULL)
        PARTITION BY RANGE (part);
    CREATE TABLE frames_new (LIKE frames INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
                             part bigint NOT NULL)
        PARTITION BY RANGE (part);
    INSERT INTO journal_partitions (lo, hi) VALUES (0, upto);
    EXECUTE format('CREATE TABLE events_0 PARTITION OF events_new FOR VALUES FROM (0) TO (%s)',
                   upto);
    EXECUTE format('CREATE TABLE frames_0 PARTITION OF frames_new FOR VALUES FROM (0) TO (%s)',
                   upto);
END $$;

INSERT INTO events_new SELECT e.*, 0 FROM events e;
INSERT INTO frames_new SELECT f.*, 0 FROM frames f;

ALTER TABLE signal_consumptions ADD COLUMN part bigint NOT NULL DEFAULT 0;
ALTER TABLE signal_consumptions ALTER COLUMN part DROP DEFAULT;

DROP TABLE events CASCADE;  -- its trigger, and signal_consumptions' foreign key
DROP TABLE frames;
ALTER TABLE events_new RENAME TO events;
ALTER TABLE frames_new RENAME TO frames;

ALTER TABLE events
    ADD CONSTRAINT events_pkey PRIMARY KEY (workflow_id, event_id, part),
    ADD CONSTRAINT events_workflow_id_fkey FOREIGN KEY (workflow_id)
        REFERENCES workflows (workflow_id) ON UPDATE CASCADE;
CREATE INDEX events_payload_sha256_idx ON events (workflow_id, payload_sha256)
    WHERE payload_sha256 IS NOT NULL;
CREATE INDEX events_signal_id_idx ON events (signal_id) WHERE signal_id IS NOT NULL;
CREATE INDEX events_step_attempt_started_idx ON events (workflow_id, step_id, attempt)
    WHERE event_type = 'STEP_ATTEMPT_STARTED';
CREATE INDEX events_step_outcome_idx ON events (workflow_id, step_id)
    WHERE event_type IN ('STEP_COMPLETED', 'STEP_FAILED');
CREATE UNIQUE INDEX events_workflow_id_child_outcome_idx ON events (workflow_id, step_id, part)
    WHERE position IS NULL AND event_type IN ('CHILD_WORKFLOW_COMPLETED', 'CHILD_WORKFLOW_FAILED');
CREATE UNIQUE INDEX events_workflow_id_position_idx ON events (workflow_id, position, part)
    WHERE position IS NOT NULL AND event_type <> 'PATCH_RECORDED';
CREATE UNIQUE INDEX events_workflow_id_remote_outcome_idx ON events (workflow_id, step_id, part)
    WHERE position IS NULL AND event_type IN ('STEP_COMPLETED', 'STEP_FAILED');
CREATE UNIQUE INDEX events_workflow_id_signal_id_idx ON events (workflow_id, signal_id, part)
    WHERE signal_id IS NOT NULL;
CREATE UNIQUE INDEX events_workflow_id_step_id_attempt_idx
    ON events (workflow_id, step_id, attempt, part) WHERE event_type = 'STEP_ATTEMPT_FAILED';
CREATE UNIQUE INDEX events_workflow_id_step_id_idx ON events (workflow_id, step_id, part)
    WHERE position IS NOT NULL;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION notify_run_event();

ALTER TABLE signal_consumptions
    ADD CONSTRAINT signal_consumptions_workflow_id_event_id_fkey
        FOREIGN KEY (workflow_id, event_id, part) REFERENCES events (workflow_id, event_id, part)
        ON UPDATE CASCADE;

ALTER TABLE frames ADD CONSTRAINT frames_pkey PRIMARY KEY (run_id, stream, seq, part);
CREATE UNIQUE INDEX frames_emit_idx ON frames (run_id, stream, step_id, attempt, emit_index, part)
    WHERE kind = 'DATA';
CREATE INDEX frames_step_idx ON frames (run_id, step_id, stream, seq);

-- Frames carry their run's part (found by the run id, the key frames have).
CREATE OR REPLACE FUNCTION reset_streams(run text, step text, below int, only_stream text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    last record;
    next_seq bigint;
    run_part bigint;
BEGIN
    IF run IS NULL THEN
        RETURN;
    END IF;
    FOR last IN
        SELECT DISTINCT ON (f.stream) f.stream, f.kind, f.attempt FROM history.frames f
        WHERE f.run_id = run AND f.step_id = step
          AND (only_stream IS NULL OR f.stream = only_stream)
        ORDER BY f.stream, f.seq DESC
    LOOP
        IF last.kind = 'DATA' AND last.attempt < below THEN
            IF run_part IS NULL THEN
                SELECT w.part INTO run_part FROM history.workflows w WHERE w.run_id = run;
            END IF;
            UPDATE history.stream_heads h SET last_seq = h.last_seq + 1
            WHERE h.run_id = run AND h.stream = last.stream RETURNING h.last_seq INTO next_seq;
            INSERT INTO history.frames (run_id, stream, seq, step_id, attempt, kind, part)
            VALUES (run, last.stream, next_seq, step, last.attempt, 'RESET', run_part);
        END IF;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION emit_frames(
    run text, run_key text, step text, try int, on_stream text, first_index bigint,
    chunks bytea[], encodings text[], origin text)
RETURNS TABLE (refused text, attempt_seen int, stored bigint, first_seq bigint,
               last_seq bigint, reset boolean, stored_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    closed boolean;
    failed int;
    started int;
    fresh int;
    base bigint;
    created boolean;
BEGIN
    stored_at := now();
    reset := false;
    INSERT INTO history.stream_heads (run_id, stream) VALUES (run, on_stream)
    ON CONFLICT (run_id, stream) DO UPDATE SET last_seq = stream_heads.last_seq
    RETURNING xmax = 0 INTO created;  -- inserted by this call, not found
    SELECT * FROM history.emit_state(run, run_key, step, try, on_stream)
      INTO closed, failed, started, stored;
    IF closed THEN
        refused := 'closed';
    ELSIF failed >= try THEN
        refused := 'failed';
        attempt_seen := failed;
    ELSIF started > try THEN
        refused := 'started';
        attempt_seen := started;
    ELSIF first_index > stored THEN
        refused := 'gap';
    END IF;
    IF refused IS NOT NULL THEN
        IF created THEN  -- nothing written by a refused call
            DELETE FROM history.stream_heads h WHERE h.run_id = run AND h.stream = on_stream;
        END IF;
        RETURN NEXT;
        RETURN;
    END IF;
    fresh := first_index + cardinality(chunks) - stored;
    IF fresh <= 0 THEN  -- all stored already: a batch sent again
        SELECT f.seq INTO last_seq FROM history.frames f
        WHERE f.run_id = run AND f.stream = on_stream AND f.step_id = step
          AND f.attempt = try AND f.kind = 'DATA'
          AND f.emit_index = first_index + cardinality(chunks) - 1;
        RETURN NEXT;
        RETURN;
    END IF;
    IF stored = 0 AND try > 1 THEN
        SELECT h.last_seq INTO base FROM history.stream_heads h
        WHERE h.run_id = run AND h.stream = on_stream;
        PERFORM history.reset_streams(run, step, try, on_stream);
        SELECT h.last_seq <> base INTO reset FROM history.stream_heads h
        WHERE h.run_id = run AND h.stream = on_stream;
    END IF;
    UPDATE history.stream_heads h SET last_seq = h.last_seq + fresh
    WHERE h.run_id = run AND h.stream = on_stream
    RETURNING h.last_seq - fresh INTO base;
    INSERT INTO history.frames
        (run_id, stream, seq, step_id, attempt, kind, emit_index, data, encoding, part)
    SELECT run, on_stream, base + c.n, step, try, 'DATA', stored + c.n - 1, c.data, c.encoding,
           w.part
    FROM unnest(chunks[cardinality(chunks) - fresh + 1:], encodings[cardinality(chunks) - fresh + 1:])
         WITH ORDINALITY AS c(data, encoding, n),
         history.workflows w
    WHERE w.run_id = run;
    first_seq := base + 1;
    last_seq := base + fresh;
    -- The stream's readers on the other replicas (commit_feed.py).
    PERFORM pg_notify(
        'perdure_run', concat_ws(E'\n', run_key, on_stream, last_seq::text, origin));
    RETURN NEXT;
END $$;
