-- Patch markers (PATCH_RECORDED): the position a marker names is where the code had reached,
-- and the call made there holds it, so a marker takes no part in the one-event-a-position
-- rule. Its step id ('$patch:' || the patch id) stays unique per run: a patch is recorded once.
DROP INDEX events_workflow_id_position_idx;
CREATE UNIQUE INDEX events_workflow_id_position_idx ON events (workflow_id, position)
    WHERE position IS NOT NULL AND event_type <> 'PATCH_RECORDED';
