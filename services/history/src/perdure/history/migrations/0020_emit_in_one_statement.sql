-- An EmitFrames call in one statement (streams.py): the statement checks the lease and takes
-- its share lock on the run's row, then calls this function, whose queries each see what was
-- committed before them (a volatile function's), so its reads under the stream head's lock see
-- every frame committed before the lock was granted. A refused call writes nothing.
--
-- Under the lock: what became of the step's attempts and how many of this attempt's chunks
-- the stream holds (emit_state: the step's own few events, in a run of any length). The chunks
-- are refused (`refused`) when the attempt is over ('closed': the step has its outcome;
-- 'failed' or 'started': a failure of this attempt or a later attempt is recorded, its number
-- in `attempt_seen`) or when they skip chunks ('gap': `stored` is how many are stored).
-- Otherwise the chunks not stored yet are stored, numbered on from the head (`first_seq` to
-- `last_seq`; none when an earlier call stored them all, and `last_seq` is then the last
-- chunk's), after a RESET frame (`reset`) when this is the attempt's first chunk and an earlier
-- attempt's are the step's last on the stream. The notification names the run's key, the
-- stream, its last frame and `origin`, the history process that stores them.
CREATE FUNCTION emit_state(run text, run_key text, step text, try int, on_stream text)
RETURNS TABLE (closed boolean, failed int, started int, stored bigint)
LANGUAGE sql STABLE AS $$
SELECT EXISTS (SELECT 1 FROM history.events e
               WHERE e.workflow_id = run_key AND e.step_id = step
                 AND e.event_type IN ('STEP_COMPLETED', 'STEP_FAILED')),
       (SELECT max(e.attempt) FROM history.events e
        WHERE e.workflow_id = run_key AND e.step_id = step
          AND e.event_type = 'STEP_ATTEMPT_FAILED'),
       (SELECT max(e.attempt) FROM history.events e
        WHERE e.workflow_id = run_key AND e.step_id = step
          AND e.event_type = 'STEP_ATTEMPT_STARTED'),
       (SELECT COALESCE(max(f.emit_index) + 1, 0) FROM history.frames f
        WHERE f.run_id = run AND f.stream = on_stream AND f.step_id = step
          AND f.attempt = try AND f.kind = 'DATA')
$$;

CREATE FUNCTION emit_frames(
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
        (run_id, stream, seq, step_id, attempt, kind, emit_index, data, encoding)
    SELECT run, on_stream, base + c.n, step, try, 'DATA', stored + c.n - 1, c.data, c.encoding
    FROM unnest(chunks[cardinality(chunks) - fresh + 1:], encodings[cardinality(chunks) - fresh + 1:])
         WITH ORDINALITY AS c(data, encoding, n);
    first_seq := base + 1;
    last_seq := base + fresh;
    -- The stream's readers on the other replicas (commit_feed.py).
    PERFORM pg_notify(
        'perdure_run', concat_ws(E'\n', run_key, on_stream, last_seq::text, origin));
    RETURN NEXT;
END $$;
