-- The journal's size in bytes (each event's payload and failure, and a fixed part an event:
-- store.EVENT_BYTES), kept by every append: a load answers it without reading the journal.
ALTER TABLE workflows ADD COLUMN history_bytes bigint NOT NULL DEFAULT 0;
UPDATE workflows w SET history_bytes = (
    SELECT COALESCE(sum(64 + COALESCE(octet_length(e.payload), 0)
                        + COALESCE(octet_length(e.failure::text), 0)), 0)
    FROM events e WHERE e.workflow_id = w.workflow_id);

-- Large payloads, stored once by content (the SHA-256 of their bytes): identical outputs of
-- many steps and runs share one row. An event names its large payload by `payload_sha256`
-- (its `payload` is then NULL, its `payload_encoding` kept); older rows keep theirs inline.
CREATE TABLE payloads (
    sha256 bytea PRIMARY KEY,
    data   bytea NOT NULL
);
ALTER TABLE events ADD COLUMN payload_sha256 bytea;
-- LoadPayload hands out a payload only to a run one of whose events names it.
CREATE INDEX events_payload_sha256_idx ON events (workflow_id, payload_sha256)
    WHERE payload_sha256 IS NOT NULL;
