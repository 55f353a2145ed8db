"""The client side: drivers start ledger workflows through both gateways, signal them with ids,
duplicate some starts and signals, cancel some, and log every operation's outcome. A call the
server answered with a decision is ok or failed; anything else (a timeout, a lost connection)
is indeterminate, and is retried with the same ids until it is decided."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from perdure.client import Client

OK, FAILED, INDETERMINATE = "ok", "failed", "indeterminate"
FAULTS, HEALED = "faults", "healed"
# Codes a server sends only after deciding: the operation did not happen.
DECIDED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
}
CALL_TIMEOUT = 5.0
SIGNAL, STRAY = "tick", "stray"  # workflows wait for ticks; strays are received, never taken


@dataclass(frozen=True)
class Mix:
    """What the drivers start and send: the choices of each run's shape, the odds of each
    extra call, the pause between a driver's runs."""

    steps: tuple[int, ...] = (1, 2, 3, 4)
    sleeps: tuple[float, ...] = (0, 0, 0.4, 1.5)  # a timer of this long (0: none)
    signals: tuple[int, ...] = (0, 0, 1, 2)
    work_seconds: tuple[float, ...] = (0.01, 0.05, 0.3)
    flaky: float = 0.3  # the odds that a run's steps each fail once first
    duplicate_start: float = 0.15
    duplicate_signal: float = 0.3
    cancel: float = 0.1
    stray: float = 0.2  # a signal nobody waits for, to one of the driver's last runs
    pause: tuple[float, float] = (0.02, 0.15)


CHAOS = Mix()


@dataclass(frozen=True)
class Op:
    """One call and what came of it."""

    kind: str  # start, signal, cancel
    workflow_id: str
    outcome: str
    phase: str
    signal_id: str = ""
    signal_name: str = ""
    code: str = ""
    duplicate: bool = False  # sent again on purpose after it was acknowledged


class Workload:
    """Driver threads with their own seeded choices; `ops` is the history the checker reads."""

    def __init__(
        self,
        gateways: list[str],
        prefix: str,
        seed: int,
        drivers: int = 4,
        mix: Mix = CHAOS,
        runs: int | None = None,
    ) -> None:
        self.prefix = prefix
        self.mix = mix
        self._runs_left = runs  # None: until stopped
        self.phase = FAULTS
        self.ops: list[Op] = []
        self.shapes: dict[str, dict[str, Any]] = {}
        self._gateways = gateways
        self._seed = seed
        self._stop = threading.Event()
        self._give_up = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._drive, args=(index,), daemon=True)
            for index in range(drivers)
        ]

    def start(self) -> None:
        """Start the drivers."""
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the drivers to start every run (a workload of so many runs)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stop(self, timeout: float) -> None:
        """No new workflows; let the drivers decide what they have in flight, for `timeout`."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._give_up.set()
        for thread in self._threads:
            thread.join(CALL_TIMEOUT * 2)

    def _log(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def _drive(self, index: int) -> None:
        rng = random.Random(f"{self._seed}:{index}")
        clients = [Client(address, timeout=CALL_TIMEOUT) for address in self._gateways]
        previous: list[str] = []
        number = 0
        try:
            while not self._stop.is_set() and self._take_run():
                number += 1
                workflow_id = f"{self.prefix}-{index}-{number}"
                self._one_workflow(rng, clients, workflow_id, previous)
                previous.append(workflow_id)
                time.sleep(rng.uniform(*self.mix.pause))
        finally:
            for client in clients:
                client.close()

    def _take_run(self) -> bool:
        """Whether the workload has another run to start (and count it as started)."""
        with self._lock:
            if self._runs_left is None:
                return True
            if self._runs_left == 0:
                return False
            self._runs_left -= 1
            return True

    def _one_workflow(
        self, rng: random.Random, clients: list[Client], workflow_id: str, previous: list[str]
    ) -> None:
        mix = self.mix
        shape = {
            "steps": rng.choice(mix.steps),
            "sleep": rng.choice(mix.sleeps),
            "signals": rng.choice(mix.signals),
            "work_seconds": rng.choice(mix.work_seconds),
            "flaky": rng.random() < mix.flaky,
        }
        with self._lock:
            self.shapes[workflow_id] = shape

        def start(client: Client) -> None:
            client.start_workflow("ledger_run", shape, workflow_id=workflow_id)

        self._decide(rng, clients, "start", workflow_id, start)
        if rng.random() < mix.duplicate_start:
            self._decide(rng, clients, "start", workflow_id, start, duplicate=True)
        for number in range(int(shape["signals"])):
            self._signal(rng, clients, workflow_id, SIGNAL, f"{workflow_id}-tick-{number}", number)
        if rng.random() < mix.cancel:
            self._decide(rng, clients, "cancel", workflow_id, lambda c: c.cancel(workflow_id))
        if previous and rng.random() < mix.stray:
            # To a run that may have ended (failed: never applied) or still runs (applied once).
            target = rng.choice(previous[-5:])
            self._signal(rng, clients, target, STRAY, f"{workflow_id}-stray", "stray")

    def _signal(
        self,
        rng: random.Random,
        clients: list[Client],
        workflow_id: str,
        name: str,
        signal_id: str,
        payload: Any,
    ) -> None:
        def send(client: Client) -> None:
            client.signal(workflow_id, name, payload, signal_id=signal_id)

        decide = functools.partial(
            self._decide,
            rng,
            clients,
            "signal",
            workflow_id,
            send,
            signal_id=signal_id,
            signal_name=name,
        )
        if decide() and rng.random() < self.mix.duplicate_signal:
            decide(duplicate=True)

    def _decide(
        self,
        rng: random.Random,
        clients: list[Client],
        kind: str,
        workflow_id: str,
        call: Callable[[Client], None],
        *,
        duplicate: bool = False,
        signal_id: str = "",
        signal_name: str = "",
    ) -> bool:
        """Call through a random gateway until the answer is a decision (or the run gives up);
        log every attempt; return whether it ended ok."""
        while True:
            phase = self.phase
            try:
                call(rng.choice(clients))
            except grpc.RpcError as error:
                code = error.code()
                outcome = FAILED if code in DECIDED else INDETERMINATE
                self._log(
                    Op(
                        kind,
                        workflow_id,
                        outcome,
                        phase,
                        signal_id,
                        signal_name,
                        code.name,
                        duplicate,
                    )
                )
                if outcome == FAILED or self._give_up.is_set():
                    return False
                time.sleep(rng.uniform(0.1, 0.4))
                continue
            self._log(Op(kind, workflow_id, OK, phase, signal_id, signal_name, "", duplicate))
            return True
