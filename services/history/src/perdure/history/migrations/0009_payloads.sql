-- Payloads are kept as the bytes their sender encoded, with the name of their encoding
-- ("json/plain", "binary/plain"): jsonb re-encoded them (number formats, key order) and could
-- not hold bytes. History never re-encodes a payload; it gives back the bytes it was given.
ALTER TABLE workflows
    ALTER COLUMN input TYPE bytea USING convert_to(input::text, 'UTF8'),
    ALTER COLUMN result TYPE bytea USING convert_to(result::text, 'UTF8'),
    ADD COLUMN input_encoding text NOT NULL DEFAULT 'json/plain',
    ADD COLUMN result_encoding text;
UPDATE workflows SET result_encoding = 'json/plain' WHERE result IS NOT NULL;

ALTER TABLE events
    ALTER COLUMN payload TYPE bytea USING convert_to(payload::text, 'UTF8'),
    ADD COLUMN payload_encoding text;
UPDATE events SET payload_encoding = 'json/plain' WHERE payload IS NOT NULL;

ALTER TABLE step_progress
    ALTER COLUMN details TYPE bytea USING convert_to(details::text, 'UTF8'),
    ADD COLUMN details_encoding text;
UPDATE step_progress SET details_encoding = 'json/plain' WHERE details IS NOT NULL;

ALTER TABLE step_tasks
    ALTER COLUMN input TYPE bytea USING convert_to(input::text, 'UTF8'),
    ADD COLUMN input_encoding text NOT NULL DEFAULT 'json/plain';
