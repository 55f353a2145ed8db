-- Flow control (flow/): what a task declares, the limits operators set on keys, the budgets
-- steps reserve against, and the order of fair grants.

-- A task's flow settings, from the request that created it (history's TaskRequest.flow):
-- NULL for a task with none, which the plain claim grants; a task with any is granted by the
-- flow claim only. `flow_keys` are its concurrency and rate keys (in `flow_namespace`), kept
-- apart for the in-flight count's index; priority and fairness key order the flow claim.
ALTER TABLE tasks
    ADD COLUMN flow jsonb,
    ADD COLUMN flow_namespace text,
    ADD COLUMN flow_keys text[] NOT NULL DEFAULT '{}',
    ADD COLUMN priority smallint NOT NULL DEFAULT 3,
    ADD COLUMN fairness_key text NOT NULL DEFAULT '';
-- The plain claim's scan skips flow tasks.
DROP INDEX tasks_task_queue_run_at_idx;
CREATE INDEX tasks_task_queue_run_at_idx ON tasks (task_queue, run_at)
    WHERE lease_owner IS NULL AND run_at IS NOT NULL AND flow IS NULL;
-- The flow claim's scan: per fairness key of a queue, by priority, then due time.
CREATE INDEX tasks_fair_due_idx ON tasks (task_queue, fairness_key, priority, run_at)
    WHERE lease_owner IS NULL AND run_at IS NOT NULL;
-- What is in flight under a key: leased tasks declaring it.
CREATE INDEX tasks_flow_keys_idx ON tasks USING gin (flow_keys) WHERE lease_owner IS NOT NULL;

-- The fairness keys seen on each queue that has flow tasks ('' among them: tasks without one),
-- each with the turn of its last grant: the key served longest ago goes first.
CREATE SEQUENCE fair_turns;
CREATE TABLE fairness (
    task_queue text NOT NULL,  -- qualified
    fairness_key text NOT NULL,
    last_turn bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (task_queue, fairness_key)
);

-- Operators' limits on a key of a namespace (NULL: no such limit), with the token buckets of
-- its rates: refilled on the database clock when a grant looks at them (full when never yet).
CREATE TABLE flow_limits (
    namespace text NOT NULL,
    key text NOT NULL,
    max_runs integer CHECK (max_runs >= 0),
    max_steps integer CHECK (max_steps >= 0),
    requests_per_second double precision CHECK (requests_per_second > 0),
    units_per_minute bigint CHECK (units_per_minute > 0),
    fairness_weight integer CHECK (fairness_weight BETWEEN 1 AND 1000),
    request_tokens double precision NOT NULL DEFAULT 0,
    unit_tokens double precision NOT NULL DEFAULT 0,
    refilled_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, key)
);

-- Budgets: a namespace's (scope 'namespace', name ''), a key's ('key', the key) or a run's own
-- ('run', its workflow id), per period. Reserved is what granted steps hold and have not
-- settled; spent is what settled steps used in the current period. Sums are numeric: exact
-- past 2^63.
CREATE TABLE budgets (
    namespace text NOT NULL,
    scope text NOT NULL CHECK (scope IN ('namespace', 'key', 'run')),
    name text NOT NULL,
    limit_units bigint CHECK (limit_units >= 0),
    limit_cost bigint CHECK (limit_cost >= 0),
    period text NOT NULL DEFAULT 'none'
        CHECK (period IN ('none', 'hour', 'day', 'week', 'month')),
    period_start timestamptz NOT NULL DEFAULT '-infinity',
    reserved_units numeric NOT NULL DEFAULT 0,
    reserved_cost numeric NOT NULL DEFAULT 0,
    spent_units numeric NOT NULL DEFAULT 0,
    spent_cost numeric NOT NULL DEFAULT 0,
    refusals bigint NOT NULL DEFAULT 0,
    run_number bigint,  -- a run's budget: the run of its workflow id it belongs to
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, scope, name)
);

-- One reservation per grant of a step task with an estimate: what it holds against which
-- budgets, and the keys whose units-per-minute allowance it drew from, settled once (by the
-- worker's report, or at its estimate when the lease ended without one).
CREATE TABLE reservations (
    workflow_id text NOT NULL,
    step_id text NOT NULL,
    fence bigint NOT NULL,
    namespace text NOT NULL,
    budgets text[] NOT NULL,  -- 'scope:name' of each budget it holds against
    keys text[] NOT NULL,  -- its keys with a units-per-minute limit
    units bigint NOT NULL,
    cost bigint NOT NULL,
    reserved_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    used_units bigint,
    used_cost bigint,
    settled_by text CHECK (settled_by IN ('report', 'estimate')),
    PRIMARY KEY (workflow_id, step_id, fence)
);
CREATE INDEX reservations_open_idx ON reservations (workflow_id) WHERE settled_at IS NULL;
CREATE INDEX reservations_settled_idx ON reservations (settled_at) WHERE settled_at IS NOT NULL;
