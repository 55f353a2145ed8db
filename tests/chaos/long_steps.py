"""One executor per lease: long step bodies (tests.chaos.workflows.long_step_run, each logging
its start and end with pid and fence in chaos.bodies) while the worker-scheduler stream breaks,
and while a step blocks its worker's event loop. The checker asserts that no two bodies of a
step ever overlap; these scenarios add what each fault must also show."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import psycopg

from perdure.client import Client
from tests.chaos.harness import SCHEDULERS, WORKERS, ChaosCluster
from tests.chaos.proxy import RESET

if TYPE_CHECKING:
    from tests.chaos.scenarios import FaultLog, Scenario

LONG_STEP_SECONDS = 8.0
RUNS_PER_CUT = 3
WAIT_SECONDS = 120.0
LOOP_BLOCKED = "the event loop has been blocked for"
SELF_FENCED = "stopping its work (it could not be renewed before its deadline)"

# Two bodies of one step overlap when one starts before the other has ended (a body without
# an end had not ended when the check ran, or its process died).
OVERLAPS = """
SELECT a.key, a.pid, a.fence, b.pid, b.fence
FROM chaos.bodies a JOIN chaos.bodies b
  ON a.key = b.key AND a.id < b.id
 AND b.started_at < COALESCE(a.ended_at, 'infinity')
 AND a.started_at < COALESCE(b.ended_at, 'infinity')
ORDER BY a.key
"""


def overlapping_bodies(conn: psycopg.Connection) -> list[str]:
    """A sentence for every two bodies of one step that ran at the same time."""
    return [
        f"two bodies of {key} ran at once: pid {pid_a} (fence {fence_a}) and pid {pid_b} "
        f"(fence {fence_b})"
        for key, pid_a, fence_a, pid_b, fence_b in conn.execute(OVERLAPS).fetchall()
    ]


def _start_runs(cluster: ChaosCluster, count: int, seconds: float, block_loop: bool) -> list[str]:
    tag = uuid.uuid4().hex[:12]  # the seed repeats in every scenario of a session
    ids = [f"long-{tag}-{index}" for index in range(count)]
    with Client(cluster.gateways[0], timeout=10) as client:
        for workflow_id in ids:
            params = {"seconds": seconds, "block_loop": block_loop}
            client.start_workflow("long_step_run", params, workflow_id=workflow_id)
    return ids


def _bodies(cluster: ChaosCluster, ids: list[str]) -> list[tuple[str, int, int, str | None]]:
    """(workflow id, pid, fence, ending) of every body of these runs, oldest first."""
    with cluster.connect() as conn:
        rows = conn.execute(
            "SELECT workflow_id, pid, fence, ending FROM chaos.bodies"
            " WHERE workflow_id = ANY(%s) ORDER BY id",
            [ids],
        ).fetchall()
    return [(str(w), int(p), int(f), e) for w, p, f, e in rows]


def _wait_started(cluster: ChaosCluster, ids: list[str]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while {row[0] for row in _bodies(cluster, ids)} != set(ids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the bodies of {ids} did not start")
        time.sleep(0.05)


def _wait_ended(cluster: ChaosCluster, ids: list[str]) -> None:
    with Client(cluster.gateways[0], timeout=10) as client:
        for workflow_id in ids:
            client.wait(workflow_id, timeout=WAIT_SECONDS)


def _worker_running(cluster: ChaosCluster, ids: list[str]) -> str:
    """A worker running one of these bodies now."""
    pids = {m.current.popen.pid: name for name, m in cluster.members.items() if name in WORKERS}
    running = [pid for _, pid, _, ending in _bodies(cluster, ids) if ending is None]
    return next((pids[pid] for pid in running if pid in pids), WORKERS[0])


Cut = Callable[[ChaosCluster, "FaultLog", list[str]], None]


def _during_long_steps(*cuts: Cut) -> Scenario:
    """For each cut: start long steps, and cut while their bodies run; then wait for every run
    to end."""

    def scenario(cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float) -> None:
        started: list[str] = []
        for cut in cuts:
            ids = _start_runs(cluster, RUNS_PER_CUT, LONG_STEP_SECONDS, block_loop=False)
            _wait_started(cluster, ids)
            cut(cluster, log, ids)
            started += ids
        _wait_ended(cluster, started)

    return scenario


def _kill_schedulers(*names: str) -> Cut:
    """kill -9 scheduler replicas for longer than a lease. One: its sessions move to the other
    and take their leases along. All: no renewal gets through, and the workers must fence
    themselves before their leases expire."""

    def cut(cluster: ChaosCluster, log: FaultLog, ids: list[str]) -> None:
        fenced_before = cluster.logs("worker").count(SELF_FENCED)
        for name in names:
            cluster.kill(name)
        log.note(f"kill -9 {len(names)} scheduler(s) during long steps")
        time.sleep(cluster.lease_ttl * 1.5)
        for name in names:
            cluster.restart(name)
        if names == SCHEDULERS and cluster.logs("worker").count(SELF_FENCED) == fenced_before:
            log.violations.append("no worker fenced itself while no scheduler was up")

    return cut


def _cut_worker_links(seconds_in_ttls: float) -> Cut:
    """Reset every connection of a worker running a body to the schedulers (and refuse new
    ones) for `seconds_in_ttls` lease TTLs: briefly, it reconnects and keeps its leases; for
    longer than a lease, it fences itself, and another worker runs the step once the lease
    has expired."""

    def cut(cluster: ChaosCluster, log: FaultLog, ids: list[str]) -> None:
        seconds = seconds_in_ttls * cluster.lease_ttl
        name = _worker_running(cluster, ids)
        fenced_before = cluster.members[name].output().count(SELF_FENCED)
        with cluster.faulted(cluster.links("worker", "scheduler", name), RESET):
            log.note("worker-scheduler link cut during long steps")
            time.sleep(seconds)
        time.sleep(0.5)
        long_cut = seconds > cluster.lease_ttl
        if long_cut and cluster.members[name].output().count(SELF_FENCED) == fenced_before:
            log.violations.append(f"{name} did not fence itself while cut off for {seconds}s")

    return cut


def _loop_blocking_step(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """An async step that blocks its worker's event loop for longer than the lease TTL: its
    lease is renewed all along (one lease, one body), and the worker names the step."""
    blocked_before = cluster.logs("worker").count(LOOP_BLOCKED)
    ids = _start_runs(cluster, 1, cluster.lease_ttl * 1.5, block_loop=True)
    log.note("step blocking the event loop past the lease TTL")
    _wait_ended(cluster, ids)
    bodies = _bodies(cluster, ids)
    if [(fence, ending) for _, _, fence, ending in bodies] != [(1, "returned")]:
        log.violations.append(f"{ids[0]} bounced: its bodies were {bodies}")
    logs = cluster.logs("worker")
    if logs.count(LOOP_BLOCKED) == blocked_before or "step long (long of" not in logs:
        log.violations.append("no worker named the step that blocked its event loop")


LONG_STEP_SCENARIOS: dict[str, Scenario] = {
    "stream-break-kill-scheduler": _during_long_steps(
        _kill_schedulers(SCHEDULERS[0]), _kill_schedulers(*SCHEDULERS)
    ),
    "stream-break-cut-link": _during_long_steps(_cut_worker_links(0.1), _cut_worker_links(1.5)),
    "loop-blocking-step": _loop_blocking_step,
}
