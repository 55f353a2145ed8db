"""RunInfo: what workflow code may know about its run (ctx.info)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunInfo:
    """The run a workflow function is running, as of the call it has reached.

    `history_length` and `history_bytes` measure the run's journal up to the latest event the
    code reached (replayed or recorded; a step's outcome from the code's next call on), so they
    read the same on every replay: a loop may compare them with a limit and call
    ctx.continue_as_new when the journal grows too long.
    """

    workflow_id: str
    workflow_type: str
    run_id: str
    run_number: int  # the run's place in its workflow id's chain, from 1
    history_length: int  # events, up to the one the code reached
    history_bytes: int  # the bytes of their payloads (inputs, outputs, signals, state)
