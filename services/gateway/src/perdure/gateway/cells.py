"""Cells: several PostgreSQL databases, each with its own history and scheduler, behind one
gateway. The servicers ask the `Router` for the cell of a run (or schedule), and call that
cell's stubs; with one cell (the default: --history-address/--scheduler-address) the router
answers that cell at once, and every call goes exactly as it would without cells.

PERDURE_CELLS (or --cells) lists the cells: `name=history/scheduler` entries separated by
';' (a gRPC target may itself hold commas: `ipv4:10.0.0.1:7401,10.0.0.2:7401`).

A handler about one run asks `await router.locate(RUN, namespace, workflow_id)` and makes its
call with `await cell.call(forward(cell.history, ...))` (errors then name a cell that is
down); a namespace-wide setting goes to every cell by naming its call in the admin servicer's
HISTORY_EVERYWHERE or SCHEDULER_EVERYWHERE; a read of every cell uses `router.every`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.gateway.directory import Directory
from perdure.gateway.forwarding import vouched
from perdure.gateway.placement import place
from perdure.internal.history.v1 import approval_service_pb2_grpc as history_approvals
from perdure.internal.history.v1 import history_service_pb2 as hpb
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc
from perdure.internal.history.v1 import schedule_service_pb2 as hspb
from perdure.internal.history.v1 import schedule_service_pb2_grpc as history_schedules
from perdure.internal.scheduler.v1 import scheduler_service_pb2_grpc as sgrpc

Answer = TypeVar("Answer")
CELL_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
# What the directory places: runs by workflow id, schedules by schedule id, keyed starts
# (debounce or singleton key) by their key.
RUN, SCHEDULE, START_KEY = "run", "schedule", "start_key"
PROBE_TIMEOUT = 10.0  # seconds a cell has to say whether it has a run


@dataclass(frozen=True)
class CellAddress:
    """One entry of PERDURE_CELLS."""

    name: str
    history: str
    scheduler: str


def parse_cells(text: str) -> list[CellAddress]:
    """`a=historyA:7401/schedulerA:7402;b=...` as a list; ValueError saying what to fix."""
    entries = [entry.strip() for entry in re.split(r"[;\n]", text) if entry.strip()]
    if not entries:
        raise ValueError("no cells: give name=history/scheduler entries separated by ';'")
    cells: list[CellAddress] = []
    for entry in entries:
        name, equals, addresses = entry.partition("=")
        name = name.strip()
        parts = [part.strip() for part in addresses.split("/")]
        if not equals or len(parts) != 2 or not all(parts) or "=" in addresses:
            raise ValueError(
                f"cell entry {entry!r} is not name=history_address/scheduler_address (for "
                "example a=10.0.0.1:7401/10.0.0.1:7402); separate cells with ';', since a "
                "gRPC target may hold commas"
            )
        if not CELL_NAME.fullmatch(name):
            raise ValueError(
                f"cell name {name!r}: use 1 to 32 lower-case letters, digits or '-', starting "
                "with a letter or digit (it is stored with every placement: never rename a cell)"
            )
        if any(cell.name == name for cell in cells):
            raise ValueError(f"cell {name!r} is listed twice")
        cells.append(CellAddress(name, parts[0], parts[1]))
    return cells


@dataclass(frozen=True)
class Cell:
    """One cell's services, as stubs. `named`: errors reaching it say which cell (set when
    there are several)."""

    name: str
    history: hgrpc.HistoryServiceStub
    scheduler: sgrpc.SchedulerServiceStub
    schedules: history_schedules.HistoryScheduleServiceStub
    approvals: history_approvals.HistoryApprovalServiceStub
    named: bool = False

    @classmethod
    def of(
        cls, name: str, history: grpc.aio.Channel, scheduler: grpc.aio.Channel, named: bool
    ) -> Cell:
        return cls(
            name,
            hgrpc.HistoryServiceStub(history),
            sgrpc.SchedulerServiceStub(scheduler),
            history_schedules.HistoryScheduleServiceStub(history),
            history_approvals.HistoryApprovalServiceStub(history),
            named,
        )

    @contextlib.contextmanager
    def reaching(self) -> Iterator[None]:
        """Around a call to this cell: UNAVAILABLE names the cell (its runs' calls fail, other
        cells' go on); every other answer passes unchanged."""
        try:
            yield
        except grpc.aio.AioRpcError as error:
            if not self.named or error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            raise errors.ApiError(
                grpc.StatusCode.UNAVAILABLE,
                errors.reason_of(error),
                f"cell {self.name!r} is unavailable ({(error.details() or '')[:300]}); calls "
                "on its runs fail until it is back, other cells' runs are not affected; call "
                "again",
            ) from error

    async def call(self, call: Awaitable[Answer]) -> Answer:
        """Await one unary call made on this cell's stubs."""
        with self.reaching():
            return await call

    async def stream(self, calls: AsyncIterator[Answer]) -> AsyncIterator[Answer]:
        """The answers of one streaming call made on this cell's stubs."""
        with self.reaching():
            async for answer in calls:
                yield answer


class EveryCell:
    """Stands for one stub of every cell (`pick` chooses which): a call named in `everywhere`
    goes to every cell at once and answers the first cell's answer (a cell that fails fails
    the call, named: each such call sets a value, so calling again is safe); any other call
    goes to the first cell. With one cell, it is that cell's stub."""

    def __init__(self, router: Router, pick: Callable[[Cell], Any], everywhere: set[str]) -> None:
        self._router = router
        self._pick = pick
        self._everywhere = everywhere

    def __getattr__(self, rpc: str) -> Any:
        first = getattr(self._pick(self._router.home), rpc)
        if self._router.single or rpc not in self._everywhere:
            return first

        async def everywhere(request: Any, **options: Any) -> Any:
            answers = await self._router.every(
                lambda cell: getattr(self._pick(cell), rpc)(request, **options)
            )
            return answers[0]

        return everywhere


async def _has_run(cell: Cell, namespace: str, workflow_id: str) -> bool:
    request = api.DescribeWorkflowRequest(namespace=namespace, workflow_id=workflow_id)
    return await _answers(
        cell.history.DescribeWorkflow(
            hpb.DescribeWorkflowRequest(request=request), timeout=PROBE_TIMEOUT, metadata=vouched()
        )
    )


async def _has_schedule(cell: Cell, namespace: str, schedule_id: str) -> bool:
    request = spb.DescribeScheduleRequest(namespace=namespace, schedule_id=schedule_id)
    return await _answers(
        cell.schedules.DescribeSchedule(
            hspb.DescribeScheduleRequest(request=request),
            timeout=PROBE_TIMEOUT,
            metadata=vouched(),
        )
    )


async def _answers(call: Awaitable[object]) -> bool:
    """True when the cell has it, False on NOT_FOUND; any other failure raises."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return True


def _unanswered(kind: str, key: str, cells: list[str]) -> errors.ApiError:
    return errors.ApiError(
        grpc.StatusCode.UNAVAILABLE,
        "",
        f"{kind.replace('_', ' ')} {key[:100]!r} is not in the directory and cell"
        f"{'s' if len(cells) > 1 else ''} {', '.join(repr(name) for name in cells)} did not "
        "answer whether it has it (down?); calls on that cell's runs fail until it is back; "
        "call again",
    )


# How the router asks a cell whether it has a run or schedule the directory has not seen.
PROBES: dict[str, Callable[[Cell, str, str], Awaitable[bool]]] = {
    RUN: _has_run,
    SCHEDULE: _has_schedule,
}


class Router:
    """Which cell a call goes to. One cell: always that one, without asking anything. Several:
    the directory's placement; for an id it has not seen, the cell that has the run (asked of
    every cell: runs started inside a cell — children, continue-as-new, schedules' runs — are
    found so, then recorded), and a new id goes where rendezvous hashing puts it."""

    def __init__(self, cells: Sequence[Cell], directory: Directory | None) -> None:
        if not cells:
            raise ValueError("a router needs at least one cell")
        if len(cells) > 1 and directory is None:
            raise ValueError("several cells need a directory")
        self.cells = tuple(cells)
        self._by_name = {cell.name: cell for cell in cells}
        self._directory = directory

    @property
    def single(self) -> bool:
        """One cell: every call goes there, as without cells."""
        return len(self.cells) == 1

    @property
    def home(self) -> Cell:
        """The first cell: namespace-wide calls that are not fanned out go to it."""
        return self.cells[0]

    def _cell(self, name: str) -> Cell:
        cell = self._by_name.get(name)
        if cell is None:
            raise errors.failed_precondition(
                "",
                f"the directory places this in cell {name!r}, which this gateway is not "
                "configured with: add it back to PERDURE_CELLS (a cell is never removed while "
                "it holds runs)",
            )
        return cell

    async def locate(self, kind: str, namespace: str, key: str) -> Cell:
        """The cell of an existing run or schedule (or, when no cell has it, the cell a new
        one would go to, which answers NOT_FOUND itself)."""
        if self.single:
            return self.home
        assert self._directory is not None
        known = await self._directory.lookup(namespace, kind, key)
        if known is not None:
            return self._cell(known)
        found, silent = await self._search(kind, namespace, key)
        if found is not None:
            return self._cell(await self._directory.record(namespace, kind, key, found.name))
        if silent:  # it may be there
            raise _unanswered(kind, key, silent)
        return self._cell(self._placed(namespace, key))

    async def place(self, kind: str, namespace: str, key: str, fresh: bool = False) -> Cell:
        """The cell for a start (or create) of `key`: where it already is, else where hashing
        puts it, recorded before the start (a failed start leaves a placement of an id that
        does not exist, which costs nothing). `fresh`: an id made here, which no cell has.

        A cell that does not answer whether it has the id does not hold up starts placed
        elsewhere: a cell that is down stops only its own runs. (The price: an id that a run
        inside that cell took, which the gateway never saw, could be started again in another
        cell meanwhile.)"""
        if self.single:
            return self.home
        assert self._directory is not None
        known = self._directory.remembered(namespace, kind, key)
        if known is not None:
            return self._cell(known)
        # No lookup first: recording answers the placement that stands, if there is one.
        hashed = self._placed(namespace, key)
        # Not the hashed cell: if it has the id, the start goes there anyway.
        found, silent = (None, []) if fresh else await self._search(kind, namespace, key, hashed)
        chosen = found.name if found is not None else hashed
        if chosen in silent:
            known = await self._directory.lookup(namespace, kind, key)
            if known is None:
                raise _unanswered(kind, key, [chosen])
            return self._cell(known)
        return self._cell(await self._directory.record(namespace, kind, key, chosen))

    async def record(self, kind: str, namespace: str, key: str, cell: Cell) -> None:
        """Note where a run a cell answered lives (a keyed start's run, say)."""
        if self._directory is not None and not self.single:
            await self._directory.record(namespace, kind, key, cell.name)

    def _placed(self, namespace: str, key: str) -> str:
        return place([cell.name for cell in self.cells], namespace, key)

    async def _search(
        self, kind: str, namespace: str, key: str, skip: str = ""
    ) -> tuple[Cell | None, list[str]]:
        """The cell that has it, asking every cell (but `skip`) at once (None if none of those
        answering has it), and the names of the cells that did not answer."""
        probe = PROBES.get(kind)
        if probe is None:  # a start key: only starts through the gateway place one
            return None, []
        asked = [cell for cell in self.cells if cell.name != skip]
        answers = await asyncio.gather(
            *(probe(cell, namespace, key) for cell in asked), return_exceptions=True
        )
        silent = []
        for cell, answer in zip(asked, answers, strict=True):
            if answer is True:
                return cell, []
            if isinstance(answer, BaseException):
                if not isinstance(answer, grpc.aio.AioRpcError | errors.ApiError):
                    raise answer
                silent.append(cell.name)
        return None, silent

    async def every(self, call: Callable[[Cell], Awaitable[Answer]]) -> list[Answer]:
        """The answers of every cell to one call, in cell order; the first cell that fails
        fails the whole (UNAVAILABLE naming it)."""

        async def one(cell: Cell) -> Answer:
            with cell.reaching():
                return await call(cell)

        return list(await asyncio.gather(*(one(cell) for cell in self.cells)))
