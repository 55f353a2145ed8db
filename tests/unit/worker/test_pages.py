"""JournalClient.load: every page of a journal, each asked for after the last event of the one
before under the same lease, given back as one response."""

from __future__ import annotations

from typing import Any, cast

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._journal import JournalClient
from perdure.worker._session import JournalSession


class PagedJournal(JournalClient):
    """Answers LoadJournal with the pages given, in order, and keeps the requests."""

    def __init__(self, pages: list[jpb.LoadJournalResponse], lease_proof: bytes = b"") -> None:
        super().__init__(cast(JournalSession, None), "wf-1", 3, lease_proof)
        self.pages = pages
        self.asked: list[jpb.LoadJournalRequest] = []

    async def call(self, request: Any) -> Any:
        copy = jpb.LoadJournalRequest()
        copy.CopyFrom(request)
        self.asked.append(copy)
        return self.pages[len(self.asked) - 1]


def page(event_ids: list[int], more: bool, **fields: Any) -> jpb.LoadJournalResponse:
    events = [wf.HistoryEvent(event_id=event_id) for event_id in event_ids]
    return jpb.LoadJournalResponse(events=events, more=more, **fields)


async def test_every_page_is_loaded_after_the_last_event_of_the_one_before() -> None:
    journal = PagedJournal(
        [
            page([1, 2], True, previous_fence=2, history_length=5),
            page([3], True, previous_fence=3, history_length=5),
            page([4, 5], False, previous_fence=3, history_length=6, history_bytes=900),
        ]
    )

    loaded = await journal.load()

    # The first is the load (which raises the fence mark); the others say they are its pages.
    assert [(r.workflow_id, r.fence, r.after_event_id, r.later_page) for r in journal.asked] == [
        ("wf-1", 3, 0, False),
        ("wf-1", 3, 2, True),
        ("wf-1", 3, 3, True),
    ]
    assert [event.event_id for event in loaded.events] == [1, 2, 3, 4, 5]
    assert not loaded.more
    assert loaded.previous_fence == 2  # the first page's: the load's own
    assert (loaded.history_length, loaded.history_bytes) == (6, 900)  # the latest


async def test_the_loads_carry_the_grants_lease_proof() -> None:
    """The grant's proof (Task.lease_proof) goes with the load that takes the lease up, so
    that history need not ask the scheduler; the later pages carry it too, harmlessly."""
    journal = PagedJournal([page([1], True), page([2], False)], lease_proof=b"signed")
    await journal.load()
    assert [r.lease_proof for r in journal.asked] == [b"signed", b"signed"]
