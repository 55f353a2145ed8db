"""The fence: which writes a lease may make, how a load takes a lease up, and why a write was
refused.

There are two kinds of lease. A run's lease (the workflows row's `fence` and `fence_key`) is
what a worker running the run's code holds; a remote step's lease (the step_tasks row's) is
what the worker executing that step holds. A load raises the fence mark to its fence and marks
it with the caller's API key (the advance); every other write of the lease's holder carries
the mark itself (held): a stale holder, a fence never loaded, another key's call or a closed
run or step matches no row, and nothing is written. The statements in store.py compose their
conditions from here (tests/unit/history/test_fencing.py checks each does); when one matches
no row, `rejection` says why.
"""

from __future__ import annotations

import logging

import grpc
from psycopg import AsyncConnection

from perdure.common import errors
from perdure.common.reasons import Reason
from perdure.common.text import printable
from perdure.history.metrics import FENCE_REJECTIONS
from perdure.history.model import OPEN_STATUSES, Lease, sql_list
from perdure.history.rows import Row, fetch_one

log = logging.getLogger(__name__)

MAX_ID_SHOWN = 200  # of an id a caller sent, in the message that answers it
OPEN = sql_list(OPEN_STATUSES)  # as SQL: ('RUNNING', 'WAITING')

# -- the conditions (SQL) ------------------------------------------------------------------------

# The advance's mark: the fence loaded and the key that loaded it (both lease kinds).
TAKE_LEASE = "fence = %(fence)s, fence_key = %(lease_key)s"


def run_lease_held(
    run: str = "",
    *,
    workflow_id: str = "%(workflow_id)s",
    fence: str = "%(fence)s",
    lease_key: str = "%(lease_key)s",
) -> str:
    """A write under a run's lease: the run is open, its mark is this fence, loaded by this
    key. `run` is the workflows row's alias with its dot ("w."); the values default to the
    statement's parameters (a batched statement names its input's columns instead)."""
    return (
        f"{run}workflow_id = {workflow_id} AND {run}fence = {fence}"
        f" AND {run}fence_key = {lease_key} AND {run}status IN {OPEN}"
    )


def run_lease_taken(run: str = "") -> str:
    """A load of a run's lease: the run is open and its mark not above this fence (a retried
    load of the same fence takes it again)."""
    return (
        f"{run}workflow_id = %(workflow_id)s AND {run}fence <= %(fence)s AND {run}status IN {OPEN}"
    )


def step_lease_held(task: str = "") -> str:
    """A write under a remote step's lease: the step has no outcome yet, its mark is this
    fence, loaded by this key (whether its run is open is the statement's to check)."""
    return (
        f"{task}workflow_id = %(workflow_id)s AND {task}step_id = %(step_id)s"
        f" AND {task}fence = %(fence)s AND {task}fence_key = %(lease_key)s AND NOT {task}closed"
    )


def step_lease_taken(task: str = "") -> str:
    """A load of a remote step's lease: its mark is not above this fence."""
    return (
        f"{task}workflow_id = %(workflow_id)s AND {task}step_id = %(step_id)s"
        f" AND {task}fence <= %(fence)s"
    )


def lease_params(lease: Lease) -> dict[str, object]:
    """The parameters the conditions above read."""
    params: dict[str, object] = {
        "workflow_id": lease.workflow_id,
        "fence": lease.fence,
        "lease_key": lease.key,
    }
    if lease.step_id:
        params["step_id"] = lease.step_id
    return params


# A run's lease as history knows it: the fence mark, the key whose load set it, the status.
SELECT_RUN_LEASE = (
    "SELECT fence, fence_key, status, cancel_requested FROM history.workflows"
    " WHERE workflow_id = %s"
)
# A remote step's lease, and whether it and its run are closed.
SELECT_STEP_LEASE = """
SELECT s.fence, s.fence_key, s.closed, w.status FROM history.step_tasks s
JOIN history.workflows w USING (workflow_id)
WHERE s.workflow_id = %s AND s.step_id = %s
"""

# -- why a fenced write was refused ----------------------------------------------------------


async def rejection(conn: AsyncConnection, lease: Lease) -> errors.ApiError:
    """Why a write under `lease` (a run's, or with a step id a remote step's) matched no row."""
    if not lease.step_id:
        row = await fetch_one(conn, SELECT_RUN_LEASE, [lease.workflow_id])
    else:
        row = await fetch_one(conn, SELECT_STEP_LEASE, [lease.workflow_id, lease.step_id])
        unknown = row is None and may_see(row, lease.key)
        if unknown and await fetch_one(conn, SELECT_RUN_LEASE, [lease.workflow_id]) is None:
            raise run_not_found(lease.workflow_id)  # an unknown run, rather than step
    return refusal(row, lease) or changed(lease.workflow_id)


async def cancel_requested(conn: AsyncConnection, lease: Lease) -> bool:
    """Whether a write under a run's `lease`, in order, matched no row for the run's cancel
    request (a start `unless_cancel`)."""
    row = await fetch_one(conn, SELECT_RUN_LEASE, [lease.workflow_id])
    return refusal(row, lease) is None and row is not None and row["cancel_requested"]


def refusal(row: Row | None, lease: Lease) -> errors.ApiError | None:
    """Why a fenced call under `lease` (`row`: a SELECT_RUN_LEASE or SELECT_STEP_LEASE row;
    None: no such run or step) matched no row: unknown run or step, stale fence, closed run or
    step, a fence never loaded. With worker keys, only the key whose load set the fence mark
    learns any of that: to every other key it is LEASE_NOT_HELD. None: the lease is in order
    (something else refused the call)."""
    workflow_id, step_id, fence = lease.workflow_id, lease.step_id, lease.fence
    if not may_see(row, lease.key):
        return lease_not_held(lease)
    if row is None:
        if step_id:
            return errors.not_found(
                Reason.STEP_NOT_FOUND, f"workflow {workflow_id!r} has no remote step {step_id!r}"
            )
        return run_not_found(workflow_id)
    what = _lease_name(lease)
    if row["fence"] > fence:
        return _stale(what, fence, row["fence"])
    if row["status"] not in OPEN_STATUSES:
        return closed(workflow_id, row["status"])
    if step_id and row["closed"]:
        return step_closed(workflow_id, step_id)
    if row["fence"] < fence:
        return _not_loaded(what, fence, "LoadStep" if step_id else "LoadJournal")
    return None


def may_see(row: Row | None, key: str) -> bool:
    """Whether the caller (API key `key`) may learn what became of a lease (`row`): anyone
    without keys; with keys, the key whose load set the fence mark (the key the scheduler
    granted the lease to) alone."""
    return not key or (row is not None and row["fence_key"] == key)


def lease_not_held(lease: Lease) -> errors.ApiError:
    """The one answer to a worker key naming a lease it does not hold: it names only what the
    caller sent, never what became of the run, its status or its fence mark."""
    return errors.ApiError(
        grpc.StatusCode.PERMISSION_DENIED,
        Reason.LEASE_NOT_HELD,
        f"API key {lease.key} holds no lease of {_lease_name(lease)} "
        f"with fence {lease.fence}: only the worker the task was granted to may use it",
    )


def run_not_found(workflow_id: str) -> errors.ApiError:
    return errors.not_found(Reason.WORKFLOW_NOT_FOUND, f"no workflow with id {workflow_id!r}")


def closed(workflow_id: str, status: str) -> errors.ApiError:
    """A write to a run that is closed."""
    return errors.failed_precondition(
        Reason.WORKFLOW_CLOSED, f"workflow {workflow_id!r} is already {status.lower()}"
    )


def step_closed(workflow_id: str, step_id: str) -> errors.ApiError:
    """A write under a remote step's lease once the step has its outcome."""
    return errors.failed_precondition(
        Reason.STEP_CLOSED,
        f"step {step_id!r} of workflow {workflow_id!r} has its outcome already; report the task "
        "done",
    )


def changed(workflow_id: str) -> errors.ApiError:
    """A call refused although its lease was in order when looked at: the run changed
    in between."""
    return errors.failed_precondition(
        Reason.STEP_CONFLICT,
        f"workflow {workflow_id!r} changed while this call was written; replay the journal "
        "instead of re-running the call",
    )


def _lease_name(lease: Lease) -> str:
    """A lease as messages and logs name it (the ids as the caller sent them, cut short)."""
    workflow = f"workflow {lease.workflow_id[:MAX_ID_SHOWN]}"
    return f"step {lease.step_id[:MAX_ID_SHOWN]} of {workflow}" if lease.step_id else workflow


def _stale(what: str, fence: int, mark: int) -> errors.ApiError:
    FENCE_REJECTIONS.add(1)
    log.warning(
        "refused a write with stale fence %d to %s (fence mark %d)", fence, printable(what), mark
    )
    return errors.failed_precondition(
        Reason.STALE_FENCE,
        f"stale fence {fence} for {what}: a newer lease (fence {mark}) owns it; stop working on it",
    )


def _not_loaded(what: str, fence: int, load: str) -> errors.ApiError:
    return errors.failed_precondition(
        Reason.FENCE_NOT_LOADED,
        f"fence {fence} for {what} was never loaded: call {load} with it first (only a load "
        "takes up a lease)",
    )
