"""Patches: a change of a workflow's code that runs started on the old code replay without,
and every other run takes (ctx.patched, ctx.deprecate_patch; docs/worker-protocol.md §22).

The answer for a patch id is fixed once per run: True if the journal holds its marker
(PATCH_RECORDED); else True, with a marker to record, if the code asks at the frontier (no call
recorded or begun at or after its position: it runs this part for the first time); else False
(the run went past this point, or began its next call there, on the old code). A marker takes
no position, so a journal without one keeps its positions. It is sent just before the run's
next record, so that asking stays a plain synchronous question; a run that suspends or ends
before recording anything needs none: its replay asks at the frontier again and gets the same
answer."""

from __future__ import annotations

from collections.abc import Iterable

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf

MAX_PATCH_ID_LENGTH = 200


class Patches:
    """One run's patch markers, the answers its code got, and the markers still to send."""

    def __init__(self, events: Iterable[wf.HistoryEvent]) -> None:
        self._markers: dict[str, wf.HistoryEvent] = {}
        self._answers: dict[str, bool] = {}
        self._unsent: list[jpb.RecordPatchRequest] = []
        self._unreached: list[wf.HistoryEvent] = []
        self.take_in(events)

    def take_in(self, events: Iterable[wf.HistoryEvent]) -> None:
        """Note the markers among `events` (a load, or the events since a kept run's)."""
        for event in events:
            if event.event_type == wf.EVENT_TYPE_PATCH_RECORDED:
                self._markers.setdefault(event.name, event)

    def patched(self, patch_id: str, position: int, at_frontier: bool) -> bool:
        """The run's answer for `patch_id`, asked with the code's next call at `position`."""
        answer = self._answers.get(patch_id)
        if answer is not None:
            return answer
        marker = self._markers.get(patch_id)
        if marker is not None:
            # Reached with the next call, where the first run's record of it was answered.
            self._unreached.append(marker)
            answer = True
        elif at_frontier:
            self._unsent.append(jpb.RecordPatchRequest(patch_id=patch_id, position=position))
            answer = True
        else:
            answer = False
        self._answers[patch_id] = answer
        return answer

    @property
    def any_unsent(self) -> bool:
        """Whether markers wait to be recorded before the run's next record."""
        return bool(self._unsent)

    def unsent(self) -> list[jpb.RecordPatchRequest]:
        """The markers to record before the run's next record, once."""
        unsent, self._unsent = self._unsent, []
        return unsent

    def reached(self) -> list[wf.HistoryEvent]:
        """The recorded markers the code has come past since it last asked, once: ctx.info
        counts them from the next call on, as the first run did."""
        reached, self._unreached = self._unreached, []
        return reached


def check_patch_id(patch_id: object) -> None:
    if not isinstance(patch_id, str) or not 0 < len(patch_id) <= MAX_PATCH_ID_LENGTH:
        raise ValueError(
            f"a patch id must be a string of 1 to {MAX_PATCH_ID_LENGTH} characters: {patch_id!r}"
        )


def deprecated_message(workflow_id: str, patch_id: str) -> str:
    """The same words in every SDK (a replay case holds them to it)."""
    return (
        f"workflow '{workflow_id}': the run took the old code path of patch '{patch_id}', "
        "which is deprecated; run it on a build that still has the old path, or let it "
        "finish before deploying the deprecation"
    )
