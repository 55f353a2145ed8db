-- A task of a closed run is never due again, whatever scheduling request arrives after the
-- close (history relays them in any order across its replicas).
ALTER TABLE tasks ADD COLUMN closed boolean NOT NULL DEFAULT false;
