"""The commit feed's watches: a notification of a run's key wakes its watchers, under the key
the run has now, and a watch that ends leaves nothing behind."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from perdure.common.errors import ApiError
from perdure.history.commit_feed import CommitFeed


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
