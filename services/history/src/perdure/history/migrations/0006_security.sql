-- Namespaces, API keys and the audit log.

-- A run's namespace, for listing; its id and task queue are qualified with it ("@ns/name")
-- outside the default namespace, so everything keyed by them is separate per namespace.
ALTER TABLE workflows ADD COLUMN namespace text NOT NULL DEFAULT 'default';
CREATE INDEX workflows_namespace_run_seq_idx ON workflows (namespace, run_seq);

-- Only the SHA-256 of a key's secret is kept: the token is shown once, at creation.
CREATE TABLE api_keys (
    key_id        text PRIMARY KEY,
    secret_sha256 bytea NOT NULL,
    namespace     text NOT NULL,
    role          text NOT NULL CHECK (role IN ('READER', 'OPERATOR', 'ADMIN', 'WORKER')),
    task_queues   text[] NOT NULL DEFAULT '{}',
    name          text NOT NULL DEFAULT '',
    created_by    text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);
CREATE INDEX api_keys_namespace_idx ON api_keys (namespace, created_at);

-- Administrative actions: key management, cancel and terminate. Append-only.
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    key_id     text NOT NULL,
    namespace  text NOT NULL,
    action     text NOT NULL,
    target     text NOT NULL,
    details    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_namespace_id_idx ON audit_log (namespace, id);
