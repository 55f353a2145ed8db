"""Patches: the marker a run's code records when it takes the new path of a patch
(ctx.patched, ctx.deprecate_patch), once per patch id and run; recording it again answers the
first marker (docs/worker-protocol.md §22)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from perdure.common import errors
from perdure.common.reasons import Reason
from perdure.history import store
from perdure.history.appends import JournalBase, call_params
from perdure.history.model import Appended, Call, EventType, Lease, StepRecord
from perdure.history.rows import fetch_one

# A marker's step id: the SDKs' names start with "$", so no call of the code can take it.
PATCH_PREFIX = "$patch:"


def patch_call(lease: Lease, patch_id: str, position: int) -> Call:
    """The marker's place in the journal: its own step id, at the position the code reached."""
    return Call(lease, f"{PATCH_PREFIX}{patch_id}", "$patch", position)


class Patches(JournalBase):
    """Recording patch markers."""

    async def record_patch(self, lease: Lease, patch_id: str, position: int) -> Appended:
        """Journal PATCH_RECORDED for `patch_id` at the code's `position`, or answer the marker
        recorded already (whatever its position): one marker per patch and run."""
        marker = patch_call(lease, patch_id, position)
        params = call_params(marker, StepRecord(EventType.PATCH_RECORDED, name=patch_id))
        return await self.append_call(marker, params, _recorded_marker)


async def _recorded_marker(conn: AsyncConnection, call: Call, params: dict[str, Any]) -> Appended:
    row = await fetch_one(
        conn, store.SELECT_PATCH, {"workflow_id": call.workflow_id, "step_id": call.step_id}
    )
    if row is None:  # the step id is taken by something else: cannot happen for "$" names
        raise errors.failed_precondition(
            Reason.STEP_CONFLICT,
            f"workflow {call.workflow_id!r} already recorded another event as {call.step_id!r}",
        )
    return Appended(row["event_id"], row["due_at"], False)
