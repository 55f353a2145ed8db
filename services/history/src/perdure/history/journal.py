"""The journal: every read and write of the history schema, one part per concept (see the
modules each part comes from)."""

from __future__ import annotations

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.history import chains
from perdure.history.approvals import Approvals
from perdure.history.builds import BuildRuns
from perdure.history.children import Children
from perdure.history.live import LiveReads
from perdure.history.metrics import count_started
from perdure.history.patches import Patches
from perdure.history.reads import Reads
from perdure.history.recovery import Recovery
from perdure.history.schedules import Schedules
from perdure.history.signals import Signals
from perdure.history.start_keys import StartKeysJournal
from perdure.history.steps import Steps
from perdure.history.streams import Streams
from perdure.history.timers import Timers


class Journal(
    StartKeysJournal,
    Schedules,
    Recovery,
    Signals,
    Timers,
    Steps,
    Children,
    Patches,
    Reads,
    BuildRuns,
    Streams,
    LiveReads,
    Approvals,
):
    """Every read and write of the history schema goes through here (Schedules extends
    Lifecycle: a schedule starts its runs as a start does)."""

    async def signal_with_start(
        self,
        workflow_id: str,
        workflow_type: str,
        task_queue: str,
        input_value: Payload,
        name: str,
        payload: Payload,
        signal_id: str | None,
        execution_timeout: float | None = None,
        flow: bytes | None = None,
    ) -> tuple[bool, bool]:
        """Start the run if the id is free, then signal it: (started, accepted), atomically."""
        async with self._pool.connection() as conn, conn.transaction():
            started = await self._create(
                conn,
                chains.start_params(
                    workflow_id,
                    workflow_type,
                    task_queue,
                    input_value,
                    run_id=chains.new_run_id(),
                    execution_timeout=execution_timeout,
                    flow=flow,
                ),
            )
            accepted = await self._signal(conn, workflow_id, name, payload, signal_id)
        self._on_scheduled()  # again, now that the transaction has committed
        if started:
            count_started(workflow_type)  # counted once committed: started = closed + open
        return started, accepted
