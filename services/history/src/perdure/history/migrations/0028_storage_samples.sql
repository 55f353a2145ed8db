-- Storage samples (storage.py): every namespace's runs, events and journal bytes, taken by one
-- history replica at a time on a slow period. The journal's growth rate is the difference of
-- the last two; samples older than a day are deleted by the sampler.
CREATE TABLE storage_samples (
    namespace text NOT NULL,
    sampled_at timestamptz NOT NULL DEFAULT now(),
    runs bigint NOT NULL,
    events bigint NOT NULL,
    history_bytes bigint NOT NULL,
    PRIMARY KEY (namespace, sampled_at)
);
