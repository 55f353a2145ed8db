"""Keyed starts: debounce and singleton (StartWorkflowRequest.debounce_key, singleton_key).

- Debounce: a start with a key joins the namespace's pending run of that key, workflow type and
  task queue: one that no worker has loaded yet (none of its code ran) and whose due time has
  not passed. That run takes the start's input (its row and its WorkflowStarted event, which
  no reader of a lease has seen) and becomes due a window from now; its id is the answer.
  Without one, a new run starts, due a window from now.
- Singleton: at most one open run per key in the namespace; a start while one is open returns
  it and starts nothing.

Starts with one key take a transaction-scoped advisory lock on it first, so two at once make
one run. The later due time of a debounced run is relayed through the outbox with the wake
reason "debounce", which moves a task no worker was granted to that time (the scheduler's
due.py); a debounce that commits within the relay's latency of the old due time may find the
run granted at it, with the new input.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg import AsyncConnection

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common import namespaces
from perdure.history import chains
from perdure.history.lifecycle import Lifecycle
from perdure.history.metrics import count_started
from perdure.history.model import RunStatus, StartKeys
from perdure.history.rows import fetch_one, payload_columns

# The wake reason of a debounced run's later due time (the scheduler's DEBOUNCE).
DEBOUNCE = "debounce"

LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"

OPEN_SINGLETON = """
SELECT workflow_id, run_id, status FROM history.workflows
WHERE namespace = %(namespace)s AND singleton_key = %(singleton_key)s
  AND status IN ('RUNNING', 'WAITING')
LIMIT 1
"""

# The pending run takes the input (its size in history_bytes too) and the later due time; its
# WorkflowStarted event, which no worker has read, the same input; the outbox the due time.
DEBOUNCE_INTO_PENDING = """
WITH pending AS (
    SELECT workflow_id FROM history.workflows
    WHERE namespace = %(namespace)s AND debounce_key = %(debounce_key)s
      AND loaded_event_count = 0 AND status = 'RUNNING' AND debounce_until > now()
      AND workflow_type = %(workflow_type)s AND task_queue = %(task_queue)s
    ORDER BY debounce_until DESC
    LIMIT 1
    FOR UPDATE
), replaced AS (
    UPDATE history.workflows w
    SET input = %(input)s, input_encoding = %(input_encoding)s,
        history_bytes = w.history_bytes - octet_length(w.input) + octet_length(%(input)s::bytea),
        debounce_until = now() + make_interval(secs => %(debounce_window)s::float8),
        updated_at = now()
    FROM pending WHERE w.workflow_id = pending.workflow_id
    RETURNING w.workflow_id, w.run_id, w.status, w.workflow_type, w.task_queue, w.run_number,
              w.debounce_until
), started AS (
    UPDATE history.events e
    SET payload = %(input)s, payload_encoding = %(input_encoding)s
    FROM replaced
    WHERE e.workflow_id = replaced.workflow_id AND e.event_type = 'WORKFLOW_STARTED'
), scheduled AS (
    INSERT INTO history.outbox
        (workflow_id, workflow_type, task_queue, run_at, wake_reason, run_number)
    SELECT workflow_id, workflow_type, task_queue, debounce_until, %(wake_reason)s, run_number
    FROM replaced
)
SELECT workflow_id, run_id, status FROM replaced
"""


class KeyedStart:
    """What a keyed start did: the run's public id and run id, its status, and how."""

    def __init__(
        self, workflow_id: str, run_id: str, status: RunStatus, started: bool, joined: str = ""
    ) -> None:
        self.workflow_id = namespaces.split(workflow_id)[1]
        self.run_id = run_id
        self.status = status
        self.started = started
        self.debounced = joined == "debounce"
        self.singleton = joined == "singleton"


class StartKeysJournal(Lifecycle):
    """Debounced and singleton starts."""

    async def start_keyed(
        self,
        workflow_id: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        keys: StartKeys,
        execution_timeout: float | None = None,
        request_id: str | None = None,
    ) -> KeyedStart | None:
        """Join the key's run, or start a new run with the keys, under the key's lock. None
        when the new run's workflow id is taken: the caller starts it as any start (which
        returns the run of that id, or refuses)."""
        namespace = namespaces.namespace_of(workflow_id)
        params = chains.start_params(
            workflow_id,
            workflow_type,
            task_queue,
            input_value,
            run_id=chains.new_run_id(),
            execution_timeout=execution_timeout,
            request_id=request_id,
            keys=keys,
        )
        async with self._pool.connection() as conn, conn.transaction():
            await _lock(conn, namespace, keys)
            joined = await self._join(conn, namespace, workflow_type, task_queue, input_value, keys)
            if joined is not None:
                outcome = joined
            elif await self._create(conn, params):
                outcome = KeyedStart(workflow_id, params["run_id"], RunStatus.RUNNING, True)
            else:
                return None
        self._on_scheduled()  # again, now that the transaction has committed
        if outcome.started:
            count_started(workflow_type)
        return outcome

    async def _join(
        self,
        conn: AsyncConnection,
        namespace: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        keys: StartKeys,
    ) -> KeyedStart | None:
        """The key's open singleton run, or its pending debounced run updated; else None."""
        if keys.singleton_key is not None:
            params: dict[str, Any] = {"namespace": namespace, "singleton_key": keys.singleton_key}
            row = await fetch_one(conn, OPEN_SINGLETON, params)
            if row is not None:
                status = RunStatus(row["status"])
                return KeyedStart(row["workflow_id"], row["run_id"], status, False, "singleton")
        if keys.debounce_key is not None:
            params = {
                "namespace": namespace,
                "debounce_key": keys.debounce_key,
                "debounce_window": keys.debounce_window,
                "workflow_type": workflow_type,
                "task_queue": task_queue,
                "wake_reason": DEBOUNCE,
                **payload_columns("input", input_value),
            }
            row = await fetch_one(conn, DEBOUNCE_INTO_PENDING, params)
            if row is not None:
                status = RunStatus(row["status"])
                return KeyedStart(row["workflow_id"], row["run_id"], status, False, "debounce")
        return None


async def _lock(conn: AsyncConnection, namespace: str, keys: StartKeys) -> None:
    """Serialize the starts of each key (in one order, so two keyed starts never deadlock)."""
    names = sorted(
        json.dumps([kind, namespace, key])
        for kind, key in (("debounce", keys.debounce_key), ("singleton", keys.singleton_key))
        if key is not None
    )
    for name in names:
        await conn.execute(LOCK_KEY, [name])
