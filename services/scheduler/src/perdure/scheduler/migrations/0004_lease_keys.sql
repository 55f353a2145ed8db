-- The API key of the session holding each lease: history lets only that key's worker take the
-- lease up (LoadJournal, LoadStep), and a reconnecting session renews only its own key's leases.
ALTER TABLE tasks ADD COLUMN lease_key text NOT NULL DEFAULT '';
