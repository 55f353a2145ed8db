-- Each signal is consumed at most once, and only by its own run: one row per consumed
-- SIGNAL_RECEIVED event, written by the statement that journals the SIGNAL_CONSUMED event
-- (consumed_by). The primary key refuses a second consumption of a signal, even by two writes
-- racing; the foreign key, an id that is no event of the run.
CREATE TABLE signal_consumptions (
    workflow_id text NOT NULL,
    event_id    bigint NOT NULL,  -- the SIGNAL_RECEIVED event
    consumed_by bigint NOT NULL,  -- the SIGNAL_CONSUMED event
    PRIMARY KEY (workflow_id, event_id),
    FOREIGN KEY (workflow_id, event_id) REFERENCES events (workflow_id, event_id)
);

-- The consumptions journaled so far: each signal's first. A journal written before this check
-- may name an id twice, or one that is not a signal: those are left out.
INSERT INTO signal_consumptions (workflow_id, event_id, consumed_by)
SELECT DISTINCT ON (c.workflow_id, taken.event_id) c.workflow_id, taken.event_id, c.event_id
FROM events c
CROSS JOIN LATERAL unnest(c.consumed) AS taken(event_id)
JOIN events s ON s.workflow_id = c.workflow_id AND s.event_id = taken.event_id
WHERE c.event_type = 'SIGNAL_CONSUMED' AND s.event_type = 'SIGNAL_RECEIVED'
ORDER BY c.workflow_id, taken.event_id, c.event_id;
