"""The commit feed's watches: a notification of a run's key wakes its watchers, under the key
the run has now, and a watch that ends leaves nothing behind."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common import limits
from perdure.common.errors import ApiError
from perdure.history.commit_feed import ORIGIN, CommitFeed, Handed


def test_a_notification_wakes_the_watchers_of_its_key_and_a_moved_watch_is_forgotten() -> None:
    async def scenario() -> None:
        feed = CommitFeed("unused")
        async with feed.watch("ns/run") as watch, feed.watch("ns/other") as other:
            feed.wake("ns/run")
            await watch.changed(within=1)  # woken at once
            feed.follow(watch, "@~archived")  # the run was archived under a new key
            feed.wake("ns/run")
            feed.wake("@~archived")
            await asyncio.wait_for(watch.changed(), 1)
            assert not other._event.is_set()  # another run's watcher slept on
        assert feed._watches == {}

    asyncio.run(scenario())


def test_a_status_watch_is_woken_by_status_changes_alone() -> None:
    async def scenario() -> None:
        feed = CommitFeed("unused")
        async with feed.watch("ns/run", status_only=True) as status, feed.watch("ns/run") as all_:
            feed.wake("ns/run")  # a commit to the run: its events
            assert all_._event.is_set() and not status._event.is_set()
            feed.wake("ns/run", status=True)  # its status changed
            await status.changed(within=1)

    asyncio.run(scenario())


def test_a_stopping_feed_ends_every_watch_as_unavailable() -> None:
    async def scenario() -> None:
        feed = CommitFeed("unused")
        async with feed.watch("ns/run") as watch:
            feed.close_watches()
            with pytest.raises(ApiError) as caught:
                await watch.changed()  # woken at once, and told to call another replica
            assert caught.value.code == grpc.StatusCode.UNAVAILABLE

    asyncio.run(scenario())


def unmade() -> list[wf.StreamFrame]:
    raise AssertionError("frames made for no reader")


def handed(stream: str, *seqs: int, size: int = 100) -> Handed:
    return Handed(stream, size, lambda: [wf.StreamFrame(seq=seq, stream=stream) for seq in seqs])


def test_a_reader_is_handed_its_streams_next_frames_and_reads_for_anything_else() -> None:
    async def scenario() -> None:
        feed = CommitFeed("unused")
        async with feed.watch("ns/run", stream="output") as reader:
            # Another stream's frames: not even made, nobody reads that stream here.
            feed.committed("ns/run", False, Handed("other", 100, unmade))
            assert not reader._event.is_set()
            # Two commits handed out of order, one of them partly read already (cursor 2).
            feed.committed("ns/run", False, handed("output", 5, 6))
            feed.committed("ns/run", False, handed("output", 2, 3, 4))
            await reader.changed(within=1)
            assert [frame.seq for frame in reader.handed_after(2) or []] == [3, 4, 5, 6]
            assert reader.handed_after(6) == []  # nothing since: no read needed

            feed.committed("ns/run", False, handed("output", 8))  # 7 not handed here
            assert reader.handed_after(6) is None
            feed.committed("ns/run", False, handed("output", 7))
            feed.wake("ns/run")  # a notification: what it stands for is unknown
            assert reader.handed_after(6) is None
            feed.committed("ns/run", False)  # a commit here that handed nothing
            assert reader.handed_after(6) is None
            assert reader.handed_after(6) == []

    asyncio.run(scenario())


def test_a_reader_whose_wait_times_out_reads() -> None:
    async def scenario() -> None:
        feed = CommitFeed("unused")
        async with feed.watch("ns/run", stream="output") as reader:
            await reader.changed(within=0.01)
            assert reader.handed_after(0) is None

    asyncio.run(scenario())


def test_a_reader_slower_than_its_stream_holds_at_most_one_answer_of_frames_and_then_reads() -> (
    None
):
    async def scenario() -> None:
        feed = CommitFeed("unused")
        half = limits.HISTORY_PAGE_BYTES // 2
        async with feed.watch("ns/run", stream="output") as reader:
            feed.committed("ns/run", False, handed("output", 1, size=half))
            feed.committed("ns/run", False, handed("output", 2, size=half))
            assert [frame.seq for frame in reader.handed_after(0) or []] == [1, 2]
            for seq in range(3, 6):  # a third of these would not fit in one answer
                feed.committed("ns/run", False, handed("output", seq, size=half))
            assert reader._handed_bytes <= limits.HISTORY_PAGE_BYTES
            assert reader.handed_after(2) is None

    asyncio.run(scenario())


def test_a_notification_of_frames_wakes_that_streams_readers_unless_this_process_stored_them() -> (
    None
):
    async def scenario() -> None:
        feed = CommitFeed("unused")
        async with (
            feed.watch("ns/run", stream="output") as reader,
            feed.watch("ns/run", stream="other") as other,
            feed.watch("ns/run") as everything,
        ):
            feed._notified(f"ns/run\noutput\n7\n{ORIGIN}")  # stored here: handed here
            assert not reader._event.is_set()
            feed._notified("ns/run\noutput\n7\nanother-replica")
            assert reader._event.is_set() and reader.handed_after(6) is None
            assert reader.handed_after(7) == []  # read up to 7: nothing more to read
            assert not other._event.is_set() and not everything._event.is_set()
            for odd in ("ns/run\nx", "ns/run\noutput\nseven\nr", "ns/run"):
                feed._notified(odd)  # anything else names a key: its watchers read
                assert everything._event.is_set()
                everything._event.clear()

    asyncio.run(scenario())
