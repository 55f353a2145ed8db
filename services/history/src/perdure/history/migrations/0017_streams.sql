-- Live results and streams.
--
-- Commit fan-out: every commit that changes a run notifies channel 'perdure_run' with the
-- run's key (its qualified workflow id, or archive key): history replicas LISTEN and wake the
-- watchers of that run (commit_feed.py). PostgreSQL sends identical notifications of one
-- transaction once, so a transaction appending many events to a run costs one message.
CREATE FUNCTION notify_run_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('perdure_run', NEW.workflow_id);
    IF NEW.event_type IN ('STEP_ATTEMPT_FAILED', 'STEP_FAILED') AND NEW.step_id IS NOT NULL THEN
        -- A failed attempt: readers drop what it emitted (streams.py).
        PERFORM history.reset_streams(
            (SELECT run_id FROM history.workflows WHERE workflow_id = NEW.workflow_id),
            NEW.step_id, COALESCE(NEW.attempt + 1, 2147483647), NULL);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION notify_run_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('perdure_run', NEW.workflow_id);
    IF OLD.workflow_id <> NEW.workflow_id THEN
        PERFORM pg_notify('perdure_run', OLD.workflow_id);
    END IF;
    RETURN NULL;
END $$;

-- Frames: the chunks step attempts emit, numbered 1, 2, 3, ... per run and stream, outside
-- the journal (streams.py). Keyed by the run id, which an archived run keeps.
CREATE TABLE stream_heads (
    run_id   text NOT NULL,
    stream   text NOT NULL,
    last_seq bigint NOT NULL DEFAULT 0,  -- UPDATE ... RETURNING allocates; its lock orders commits
    PRIMARY KEY (run_id, stream)
);

CREATE TABLE frames (
    run_id     text NOT NULL,
    stream     text NOT NULL,
    seq        bigint NOT NULL,
    step_id    text NOT NULL,
    attempt    int NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('DATA', 'RESET')),
    emit_index bigint,           -- DATA: the chunk's index among its attempt's on the stream
    data       bytea,
    encoding   text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, stream, seq)
);
-- A chunk is stored once (EmitFrames sent again after a broken stream).
CREATE UNIQUE INDEX frames_emit_idx ON frames (run_id, stream, step_id, attempt, emit_index)
    WHERE kind = 'DATA';
-- A step's last frame on each stream (reset_streams).
CREATE INDEX frames_step_idx ON frames (run_id, step_id, stream, seq);

-- The one rule for resets: on each stream (or only `only_stream`) where the step's last frame
-- is a DATA frame of an attempt before `below`, append a RESET frame tagged with that attempt.
-- Called for every failed attempt (the events trigger above) and when an attempt's first frame
-- arrives (a lost attempt whose failure is not recorded yet).
CREATE FUNCTION reset_streams(run text, step text, below int, only_stream text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    last record;
    next_seq bigint;
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
            UPDATE history.stream_heads h SET last_seq = h.last_seq + 1
            WHERE h.run_id = run AND h.stream = last.stream RETURNING h.last_seq INTO next_seq;
            INSERT INTO history.frames (run_id, stream, seq, step_id, attempt, kind)
            VALUES (run, last.stream, next_seq, step, last.attempt, 'RESET');
        END IF;
    END LOOP;
END $$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION notify_run_event();
CREATE TRIGGER workflows_notify AFTER UPDATE OF status, workflow_id ON workflows
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       OR OLD.workflow_id IS DISTINCT FROM NEW.workflow_id)
    EXECUTE FUNCTION notify_run_status();

-- Retention: frames of runs closed longer ago than PERDURE_STREAM_RETENTION are deleted.
CREATE INDEX workflows_closed_at_idx ON workflows (closed_at) WHERE closed_at IS NOT NULL;
