"""The cluster on a primary and a synchronous standby (tests/fixtures/replicated_postgres.py),
every service given the multi-host URL of both; and the failover under load: kill -9 of the
primary's postmaster, pg_ctl promote of the standby, the load going on."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psycopg

from perdure.client import Client
from tests.chaos.harness import ChaosCluster
from tests.chaos.scenarios import FaultLog
from tests.fixtures.replicated_postgres import ReplicatedPostgres

# How long the first write after the promotion may take before the scenario reports it lost.
RECONNECT_TIMEOUT = 60.0
PROBE_TIMEOUT = 2.0
# A run of the chaos workflow with nothing in it: the probe's write.
PROBE_SHAPE = {"steps": 1, "sleep": 0, "signals": 0, "work_seconds": 0.0, "flaky": False}


@dataclass
class Failover:
    """What one failover took, in seconds from the kill of the primary."""

    promoted: float = 0.0  # the standby took writes
    first_write: float = 0.0  # a start through a gateway was acknowledged again
    services_died: list[str] = field(default_factory=list)


class FailoverCluster(ChaosCluster):
    """The chaos cluster, its database a replicated pair the services reach directly (not
    through the proxy) by one multi-host URL."""

    def __init__(self, workdir: Path, seed: int, lease_ttl: float = 4.0) -> None:
        super().__init__(workdir, seed, lease_ttl)
        self.pair = ReplicatedPostgres(workdir / "pair")
        self.failovers: list[Failover] = []

    def start_database(self) -> None:
        if not self.database_up:
            self.pair.start()
        self.dsn = self.pair.url()
        self.database_up = True

    def stop_database(self) -> None:
        raise NotImplementedError("a failover cluster's database fails over; it is not stopped")

    def _database_through(self, source: str, socket: str) -> str:
        return self.pair.url()

    def _socket_path(self) -> str:
        return ""

    def connect(self) -> psycopg.Connection:
        """A connection to the current primary."""
        return psycopg.connect(self.pair.url(), autocommit=True)

    def close(self) -> None:
        self.database_up = False  # the pair is not the embedded server ChaosCluster stops
        try:
            super().close()
        finally:
            self.pair.remove()


def primary_failover(
    cluster: ChaosCluster, rng: random.Random, log: FaultLog, duration: float
) -> None:
    """Under load: kill -9 the primary, promote the standby a moment later, time the first
    acknowledged write after it, and keep the load going until `duration` is up. A service
    process must not die of it (heal would restart it and hide that)."""
    assert isinstance(cluster, FailoverCluster)
    started = time.monotonic()
    time.sleep(rng.uniform(0.3, 0.5) * duration)
    killed = time.monotonic()
    cluster.pair.kill_primary()
    log.note("kill -9 of the primary")
    time.sleep(rng.uniform(0.5, 1.5))  # no primary at all for a moment
    cluster.pair.promote()
    failover = Failover(promoted=time.monotonic() - killed)
    log.note("standby promoted")
    failover.first_write = _first_write(cluster.gateways[0], killed)
    failover.services_died = [m.name for m in cluster.members.values() if not m.alive()]
    cluster.failovers.append(failover)
    print(
        f"failover: standby promoted {failover.promoted:.1f}s after the kill -9; the first start "
        f"acknowledged {failover.first_write:.1f}s after it "
        f"({failover.first_write - failover.promoted:.1f}s after the promotion)"
    )
    if failover.services_died:
        log.violations.append(f"processes died of the failover: {failover.services_died}")
    time.sleep(max(0.0, duration - (time.monotonic() - started)))


def _first_write(gateway: str, since: float) -> float:
    """Seconds from `since` until a start through `gateway` is acknowledged."""
    deadline = time.monotonic() + RECONNECT_TIMEOUT
    with Client(gateway, timeout=PROBE_TIMEOUT) as client:
        while True:
            try:
                client.start_workflow(
                    "ledger_run", PROBE_SHAPE, workflow_id=f"failover-probe-{uuid.uuid4().hex}"
                )
                return time.monotonic() - since
            except grpc.RpcError as error:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"no start acknowledged within {RECONNECT_TIMEOUT:.0f}s of the promotion"
                        f" (last: {error.code().name})"
                    ) from error
                time.sleep(0.05)
