"""The worker's leases: held, renewed from threads of their own, fenced at their deadline.

One executor per lease. A lease can outlive this worker's hold on it: the scheduler grants it
again once it expires, whatever the worker still runs. So the worker must stop a lease's work
before the lease can expire:

- Renewal does not depend on user code: a thread renews every lease with
  TaskService.RenewLeases on a blocking channel of its own, so an async step that blocks the
  event loop (reported by _loop_watch) does not let its lease expire and its run bounce.
- Each renewal answers with the database clock's now and each lease's expiry on that clock.
  The database read `now` no earlier than the request was sent, so a lease expiring at `E`
  lasts at least until `sent + (E - now)` on this worker's monotonic clock; less
  MARGIN_FRACTION of the TTL, that is the worker's deadline for it. A grant carries its expiry
  too, read against the last renewal's clock: a grant delivered late (the event loop was
  stalled) may be dead on arrival, and is then not started; one that is not is renewed with
  the others, every interval (renewing every held lease at each grant cost the scheduler a
  statement per held lease per grant). A lease a renewal leaves out is no longer this
  worker's: its work stops at once.
- A second thread fences: a lease whose deadline passes without a renewal (the scheduler or
  the link to it is down) is dropped and its task cancelled, which cancels its async step
  bodies and its workflow code. A sync step body runs in a thread, which cannot be stopped: it
  is abandoned, runs on until it returns, and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from dataclasses import dataclass

import grpc
from google.protobuf import timestamp_pb2

from perdure.api.worker.v1 import task_service_pb2 as tpb
from perdure.api.worker.v1 import task_service_pb2_grpc as tgrpc
from perdure.worker._loop_watch import LoopWatch, running_in
from perdure.worker._telemetry import LEASES_SELF_FENCED

log = logging.getLogger("perdure.worker")

# How much of the TTL the worker keeps in hand: its work stops this long before the lease can
# expire (covering a grant's delivery, a thread's wake-up, a cancellation reaching the loop).
MARGIN_FRACTION = 0.25
# How often the fencing thread looks at deadlines and probes the event loop.
TICK_SECONDS = 0.1
# The second retry of a failed renewal waits this much of the interval; each later one twice
# as long as the one before, up to the interval.
RETRY_FRACTION = 1 / 16

Key = tuple[str, str]  # (workflow id, step id)


@dataclass
class _Held:
    fence: int
    owner: asyncio.Task[None]  # the task running the lease's work
    deadline: float  # monotonic: the work stops then unless renewed


def _next_renewal(interval: float, failures: int) -> float:
    """How long to wait before the next renewal. After a failed one, not a whole interval: a
    lease lasts three, and an attempt that timed out has used one already, so waiting another
    would let it expire after a single slow answer. The first retry goes at once (the channel
    may pick another scheduler replica), later ones back off towards the interval."""
    if not interval:
        return TICK_SECONDS
    if failures == 0:
        return interval
    if failures == 1:
        return 0.0
    return min(interval, interval * RETRY_FRACTION * 2.0 ** (failures - 2))


def task_name(lease: tpb.LeaseRef) -> str:
    """A task as logs name it: "workflow <id>", or "step <step> of <id>"."""
    if lease.step_id:
        return f"step {lease.step_id} of {lease.workflow_id}"
    return f"workflow {lease.workflow_id}"


class LeaseKeeper:
    """The leases a worker holds; renews them and fences their work from two daemon threads.

    Every method may be called from any thread.
    """

    def __init__(
        self, stub: tgrpc.TaskServiceStub, loop: asyncio.AbstractEventLoop, task_queue: str
    ) -> None:
        self._stub = stub
        self._loop = loop
        self._task_queue = task_queue
        self._lock = threading.Lock()
        self._held: dict[Key, _Held] = {}
        self._fenced: set[asyncio.Task[None]] = set()  # owners cancelled by a fence
        self._ttl = 0.0
        self._interval = 0.0
        # (monotonic time a renewal was sent, the database clock in its answer, in seconds)
        self._clock: tuple[float, float] | None = None
        self._renew_now = threading.Event()
        self._stopped = threading.Event()
        self._watch = LoopWatch(loop)
        self._threads = [
            threading.Thread(target=self._renew_loop, name="perdure-lease-renewer", daemon=True),
            threading.Thread(target=self._fence_loop, name="perdure-lease-fence", daemon=True),
        ]

    def start(self) -> None:
        """Start renewing and fencing."""
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop renewing and fencing (the threads end on their own, at their next wake-up)."""
        self._stopped.set()
        self._renew_now.set()

    def configure(self, ttl: float, interval: float) -> None:
        """Take the lease TTL and the renewal interval from a welcome; read the database
        clock (a renewal) at once."""
        with self._lock:
            self._ttl, self._interval = ttl, interval
        self._renew_now.set()

    def hold(self, task: tpb.Task, owner: asyncio.Task[None]) -> bool:
        """Hold a fresh grant, run by `owner`; False, and nothing held, when the grant arrived
        past its deadline. A grant read against the clock has its true deadline and waits for
        the next renewal of them all; one held on a guess is renewed at once."""
        now = time.monotonic()
        with self._lock:
            exact = self._clock is not None and task.HasField("lease_expire_time")
            if exact:
                deadline = self._deadline(task.lease_expire_time)
            else:  # no clock read yet: the margin must cover the grant's delivery
                deadline = now + self._ttl * (1 - MARGIN_FRACTION)
            if deadline <= now:
                return False
            self._held[task.workflow_id, task.step_id] = _Held(task.fence, owner, deadline)
        if not exact:
            self._renew_now.set()
        return True

    def _deadline(self, expires: timestamp_pb2.Timestamp) -> float:
        """The local deadline of a lease expiring at `expires` on the database clock."""
        assert self._clock is not None
        sent, database_now = self._clock
        left = expires.ToNanoseconds() / 1e9 - database_now
        return sent + left - self._ttl * MARGIN_FRACTION

    def forget(self, lease: tpb.LeaseRef) -> None:
        """Stop holding a lease (if its fence matches): the worker is done with it."""
        with self._lock:
            held = self._held.get((lease.workflow_id, lease.step_id))
            if held is not None and held.fence == lease.fence:
                del self._held[lease.workflow_id, lease.step_id]

    def refs(self) -> list[tpb.LeaseRef]:
        """The leases held now."""
        with self._lock:
            return [
                tpb.LeaseRef(workflow_id=workflow_id, step_id=step_id, fence=held.fence)
                for (workflow_id, step_id), held in self._held.items()
            ]

    def revoke(self, lease: tpb.LeaseRef, reason: str) -> None:
        """The scheduler says the lease is not this worker's: stop its work now."""
        with self._lock:
            key = (lease.workflow_id, lease.step_id)
            held = self._held.get(key)
            if held is None or held.fence != lease.fence:
                return
            del self._held[key]
        self._fence(lease, held, f"the scheduler revoked it: {reason}")

    def fenced(self, owner: asyncio.Task[None]) -> bool:
        """Whether `owner` was cancelled because its lease was fenced (asked once)."""
        with self._lock:
            if owner in self._fenced:
                self._fenced.discard(owner)
                return True
            return False

    def _renew_loop(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            self._renew_now.wait(_next_renewal(self._interval, failures))
            self._renew_now.clear()
            if self._stopped.is_set():
                return
            renewed = self._renew(failures)
            if renewed and failures:
                log.info("leases renewed again, after %d failed attempt(s)", failures)
            failures = 0 if renewed else failures + 1

    def _renew(self, failures: int) -> bool:
        """Renew every lease held; say whether the scheduler answered."""
        leases = self.refs()
        if not self._interval or (not leases and self._clock is not None):
            return True
        sent = time.monotonic()
        try:
            response = self._stub.RenewLeases(
                tpb.RenewLeasesRequest(leases=leases), timeout=self._interval
            )
        except grpc.RpcError as error:
            if not failures:
                log.warning(
                    "cannot renew %d lease(s) (%s); retrying, and their work stops at its "
                    "deadline unless a renewal gets through",
                    len(leases),
                    error.code().name if isinstance(error, grpc.Call) else error,
                )
            return False
        lost: list[tuple[tpb.LeaseRef, _Held]] = []
        database_now = response.now.ToNanoseconds() / 1e9
        if self._clock is None:
            log.info(
                "read the database clock (%+.1f ms from this host's, a round trip included): "
                "lease deadlines are judged by it from now on",
                (database_now - time.time()) * 1000,
            )
        with self._lock:
            self._clock = (sent, database_now)
            renewed = {
                (r.lease.workflow_id, r.lease.step_id, r.lease.fence): r for r in response.renewed
            }
            for lease in leases:
                key = (lease.workflow_id, lease.step_id)
                held = self._held.get(key)
                if held is None or held.fence != lease.fence:
                    continue  # done with meanwhile
                answer = renewed.get((*key, lease.fence))
                if answer is not None:
                    held.deadline = self._deadline(answer.expire_time)
                else:
                    del self._held[key]
                    lost.append((lease, held))
        for lease, held in lost:
            self._fence(lease, held, "the scheduler no longer holds it for this worker")
        return True

    def _fence_loop(self) -> None:
        while not self._stopped.wait(TICK_SECONDS):
            self._fence_expired()
            self._watch.check()

    def _fence_expired(self) -> None:
        now = time.monotonic()
        with self._lock:
            expired = [(key, held) for key, held in self._held.items() if held.deadline <= now]
            for key, _ in expired:
                del self._held[key]
        for (workflow_id, step_id), held in expired:
            lease = tpb.LeaseRef(workflow_id=workflow_id, step_id=step_id, fence=held.fence)
            self._fence(lease, held, "it could not be renewed before its deadline")

    def _fence(self, lease: tpb.LeaseRef, held: _Held, why: str) -> None:
        """Stop a dropped lease's work: cancel its task (a sync step's thread runs on)."""
        if held.owner.done():
            return  # finished; its TaskDone waits for the next session
        with self._lock:
            self._fenced.add(held.owner)
        LEASES_SELF_FENCED.add(1, {"perdure.task_queue": self._task_queue})
        log.warning(
            "%s (fence %d): stopping its work (%s), before another worker can be granted it; "
            "running: %s. Async code is cancelled; a sync step's thread cannot be stopped and "
            "runs on, abandoned, its result dropped",
            task_name(lease),
            lease.fence,
            why,
            running_in(held.owner) or "no step",
        )
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing of it runs
            self._loop.call_soon_threadsafe(held.owner.cancel)
