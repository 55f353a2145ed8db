-- What a remote step's attempt used, as its handler reported it with its outcome:
-- {"units": n, "cost_micros": n, "model": "..."} (model only for a model call). NULL: nothing
-- reported. Budgets count the same report in the scheduler's ledger; this is the run's record.
ALTER TABLE events ADD COLUMN usage jsonb;
