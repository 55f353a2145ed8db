"""RememberedKeys: a key in steady use is checked again beside its calls, never in front of
them, and a memory never vouches for a key longer than REMEMBER_SECONDS after its check was
asked, nor after a refusal or a forget()."""

from __future__ import annotations

import asyncio

import grpc
import psycopg
import pytest

from perdure.common import errors
from perdure.common.auth import Principal, RememberedKeys
from perdure.common.reasons import Reason

TOKEN = "prd_k1_secret"
KEY = Principal("k1", "default", 1)
LIFE = 10.0  # seconds a verified key is remembered, on the fake clock


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Checks:
    """A check that counts its calls and answers each only when the test lets it."""

    def __init__(self) -> None:
        self.asked = 0
        self.answers: asyncio.Queue[Principal | Exception] = asyncio.Queue()

    async def __call__(self, token: str) -> Principal:
        self.asked += 1
        answer = await self.answers.get()
        if isinstance(answer, Exception):
            raise answer
        return answer


def revoked() -> errors.ApiError:
    return errors.ApiError(grpc.StatusCode.UNAUTHENTICATED, Reason.API_KEY_REVOKED, "revoked")


async def settled() -> None:
    """Let the rechecks started so far run to their end."""
    for _ in range(5):
        await asyncio.sleep(0)


async def remembered(clock: Clock, checks: Checks) -> RememberedKeys:
    keys = RememberedKeys(checks, LIFE, clock)
    checks.answers.put_nowait(KEY)
    assert await keys.authenticate(TOKEN) == KEY  # the first call waits for its check
    assert checks.asked == 1
    return keys


async def test_a_key_in_steady_use_is_checked_again_beside_its_calls_not_before_them() -> None:
    clock, checks = Clock(), Checks()
    keys = await remembered(clock, checks)
    clock.now = LIFE * 0.4
    assert await keys.authenticate(TOKEN) == KEY
    assert checks.asked == 1  # young: no check at all
    for moment in (0.6, 0.7, 0.9):
        clock.now = LIFE * moment
        # The check asked at 0.6 has no answer yet; these calls would hang if they waited.
        assert await asyncio.wait_for(keys.authenticate(TOKEN), 5) == KEY
    await settled()
    assert checks.asked == 2  # one recheck for all three
    checks.answers.put_nowait(KEY)
    await settled()
    clock.now = LIFE * 1.05  # past the first check's life, young in the recheck's (asked at 0.6)
    assert await asyncio.wait_for(keys.authenticate(TOKEN), 5) == KEY
    await settled()
    assert checks.asked == 2


async def test_a_key_a_recheck_refuses_is_refused_at_its_next_call() -> None:
    clock, checks = Clock(), Checks()
    keys = await remembered(clock, checks)
    clock.now = LIFE * 0.6
    assert await keys.authenticate(TOKEN) == KEY  # answered from memory; the recheck starts
    checks.answers.put_nowait(revoked())
    await settled()
    clock.now = LIFE * 0.7  # the memory's life is not over, but it was refused
    checks.answers.put_nowait(revoked())
    with pytest.raises(errors.ApiError) as refused:
        await keys.authenticate(TOKEN)
    assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert checks.asked == 3


async def test_a_recheck_that_fails_for_another_reason_leaves_the_memory_to_expire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, checks = Clock(), Checks()
    keys = await remembered(clock, checks)
    clock.now = LIFE * 0.6
    assert await keys.authenticate(TOKEN) == KEY
    checks.answers.put_nowait(
        errors.database_unavailable(psycopg.OperationalError("server closed the connection"))
    )
    await settled()
    assert "could not check an API key again" in caplog.text
    clock.now = LIFE * 0.9
    assert await asyncio.wait_for(keys.authenticate(TOKEN), 5) == KEY  # and rechecks again
    checks.answers.put_nowait(RuntimeError("history unreachable"))
    await settled()
    clock.now = LIFE  # expired: the call waits for a check of its own, and has its answer
    checks.answers.put_nowait(revoked())
    with pytest.raises(errors.ApiError):
        await keys.authenticate(TOKEN)
    assert checks.asked == 4


async def test_a_memory_lasts_from_when_its_check_was_asked_not_answered() -> None:
    clock, checks = Clock(), Checks()
    keys = RememberedKeys(checks, LIFE, clock)
    first = asyncio.create_task(keys.authenticate(TOKEN))
    await settled()
    clock.now = LIFE * 0.8  # a slow answer: the key was known good at 0, not at 0.8
    checks.answers.put_nowait(KEY)
    assert await first == KEY
    clock.now = LIFE * 1.1
    checks.answers.put_nowait(revoked())
    with pytest.raises(errors.ApiError):
        await keys.authenticate(TOKEN)


async def test_forgetting_a_key_drops_what_a_check_under_way_would_remember() -> None:
    clock, checks = Clock(), Checks()
    keys = await remembered(clock, checks)
    clock.now = LIFE * 0.6
    assert await keys.authenticate(TOKEN) == KEY  # its recheck is under way
    await settled()
    keys.forget(KEY.key_id)  # revoked through this process meanwhile
    checks.answers.put_nowait(KEY)  # the recheck's answer, asked before the revocation
    await settled()
    checks.answers.put_nowait(revoked())
    with pytest.raises(errors.ApiError):
        await keys.authenticate(TOKEN)
    assert checks.asked == 3
