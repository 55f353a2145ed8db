"""Child workflows as the code sees them: the handle `ctx.start_child` returns, the default
child id, the parent-close policies, and the error a child that did not complete raises
(docs/worker-protocol.md §28)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._errors import ChildWorkflowFailedError
from perdure.worker._replay import Call

if TYPE_CHECKING:
    from perdure.worker._context import WorkflowContext

# A workflow id's longest (the platform's limit).
MAX_WORKFLOW_ID_LENGTH = 255

# ctx.child's parent_close_policy values, and what they send.
POLICIES = {
    "terminate": wf.PARENT_CLOSE_POLICY_TERMINATE,
    "request_cancel": wf.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
    "abandon": wf.PARENT_CLOSE_POLICY_ABANDON,
}


def close_policy(name: str) -> wf.ParentClosePolicy:
    """A parent_close_policy argument as the protocol's enum."""
    if name not in POLICIES:
        raise ValueError(f"parent_close_policy must be one of {sorted(POLICIES)}, not {name!r}")
    return POLICIES[name]


def public_id(workflow_id: str) -> str:
    """A workflow id without its namespace (a worker of namespace ns sees "@ns/<id>")."""
    return workflow_id.split("/", 1)[1] if workflow_id.startswith("@") else workflow_id


def child_id(parent_id: str, run_number: int, position: int, given: str | None) -> str:
    """The child's workflow id: `given`, or "<parent id>-child-<position>" (the position of
    the child call in the parent's code; "-run-<n>" after it in the n-th run of the parent's
    chain, n > 1), the same on every replay."""
    if given is not None:
        if not isinstance(given, str) or not given or given != given.strip():
            raise ValueError(f"id must be a non-empty workflow id, not {given!r}")
        if len(given) > MAX_WORKFLOW_ID_LENGTH or given.startswith("@"):
            raise ValueError(
                f"id must have at most {MAX_WORKFLOW_ID_LENGTH} characters and not start with '@'"
            )
        return given
    made = f"{public_id(parent_id)}-child-{position}"
    if run_number > 1:
        made += f"-run-{run_number}"
    if len(made) > MAX_WORKFLOW_ID_LENGTH:
        raise ValueError(
            f"the default child id {made[:60]!r}... is longer than {MAX_WORKFLOW_ID_LENGTH} "
            "characters: pass id="
        )
    return made


def child_failed(call_step_id: str, event: wf.HistoryEvent) -> ChildWorkflowFailedError:
    """The error a recorded CHILD_WORKFLOW_FAILED raises into the code."""
    return ChildWorkflowFailedError(
        call_step_id, event.failure, event.child_workflow_id, event.child_run_id, event.name
    )


class ChildWorkflowHandle:
    """A child workflow `ctx.start_child` started: its ids, and `await handle.result()` for its
    result (ChildWorkflowFailedError if it did not complete). Pass several to `ctx.gather`."""

    def __init__(self, ctx: WorkflowContext, call: Call, workflow_id: str, run_id: str) -> None:
        self._ctx = ctx
        self.call = call
        self.workflow_id = workflow_id  # the child's, without the namespace
        self.run_id = run_id  # "" when it could not start (result() raises then)

    @property
    def step_id(self) -> str:
        """The child call's step id in the parent's journal."""
        return self.call.step_id

    async def result(self) -> Any:
        """The child's result, once it completes; the parent waits holding no worker."""
        [value] = await self._ctx.gather(self)
        return value
