"""The threads of sync step bodies: reused while idle, never shared by two running bodies, and
ended after a while idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from perdure.worker._threads import IDLE_NAME, BodyThreads

WAIT = 10.0  # seconds: generous, never reached unless the behaviour is broken


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def _run_and_wait(pool: BodyThreads, name: str = "perdure-step-body") -> tuple[int, str]:
    """Run one job; return the ident and the name of the thread that ran it."""
    ran = threading.Event()
    seen: list[tuple[int, str]] = []

    def job() -> None:
        seen.append((threading.get_ident(), threading.current_thread().name))
        ran.set()

    idle_before = pool.idle
    pool.run(job, name)
    assert ran.wait(WAIT)
    # The thread goes back to the idle list just after the job returns.
    _until(lambda: pool.idle >= max(idle_before, 1), "the thread to be idle again")
    return seen[0]


def test_a_body_after_another_runs_on_the_same_thread() -> None:
    pool = BodyThreads()
    first, first_name = _run_and_wait(pool, "perdure-step-a")
    second, second_name = _run_and_wait(pool, "perdure-step-b")
    assert first == second
    assert pool.started == 1
    # Each body's thread bears the body's name while it runs it.
    assert (first_name, second_name) == ("perdure-step-a", "perdure-step-b")


def test_a_body_still_running_keeps_its_thread_and_the_next_body_gets_another() -> None:
    pool = BodyThreads()
    release = threading.Event()
    abandoned: list[int] = []

    def stuck() -> None:  # a body past its time limit, abandoned by its attempt
        abandoned.append(threading.get_ident())
        release.wait(WAIT)

    pool.run(stuck, "perdure-step-stuck")
    _until(lambda: bool(abandoned), "the stuck body to start")
    later, _ = _run_and_wait(pool)
    assert later != abandoned[0]
    assert pool.started == 2
    release.set()
    _until(lambda: pool.idle == 2, "both threads to be idle")


def test_bodies_running_together_each_have_a_thread_of_their_own() -> None:
    pool = BodyThreads()
    count = 8
    arrived = threading.Barrier(count + 1)  # passes only once every body runs at once
    idents: list[int] = []
    lock = threading.Lock()

    def body() -> None:
        with lock:
            idents.append(threading.get_ident())
        arrived.wait(WAIT)

    for _ in range(count):
        pool.run(body, "perdure-step-together")
    arrived.wait(WAIT)
    assert len(set(idents)) == count
    _until(lambda: pool.idle == count, "every thread to be idle")
    # A second wave reuses them all and starts none.
    arrived.reset()
    idents.clear()
    for _ in range(count):
        pool.run(body, "perdure-step-together")
    arrived.wait(WAIT)
    assert pool.started == count
    assert len(set(idents)) == count


def test_a_thread_idle_for_long_ends_and_a_new_one_starts_later() -> None:
    pool = BodyThreads(idle_seconds=0.05)
    first, _ = _run_and_wait(pool)
    thread = next(t for t in threading.enumerate() if t.ident == first)
    assert thread.name == IDLE_NAME
    thread.join(WAIT)
    assert not thread.is_alive()
    assert pool.idle == 0
    _run_and_wait(pool)
    assert pool.started == 2


def test_a_thread_taken_as_it_gives_up_waiting_still_runs_its_job() -> None:
    # Jobs handed over while threads time out: none is lost.
    pool = BodyThreads(idle_seconds=0.001)
    done = threading.Semaphore(0)
    jobs = 300
    for _ in range(jobs):
        pool.run(done.release, "perdure-step-race")
        time.sleep(0.0005)
    for _ in range(jobs):
        assert done.acquire(timeout=WAIT)
