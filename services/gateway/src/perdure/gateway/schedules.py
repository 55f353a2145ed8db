"""The public ScheduleService: validated here (a schedule's action as a start is), kept and fired
by history, in the schedule's cell (its runs start there too)."""

from __future__ import annotations

from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.api.workflow.v1 import schedule_service_pb2_grpc as sgrpc
from perdure.common import errors, schedule_spec
from perdure.common.convert import seconds_of
from perdure.common.text import require_storable
from perdure.gateway import merge, validate
from perdure.gateway.cells import SCHEDULE, Cell, Router
from perdure.gateway.forwarding import in_namespace, vouched
from perdure.gateway.handlers import (
    DOWNSTREAM_TIMEOUT,
    Callers,
    WorkflowServicer,
    validated_start,
)
from perdure.internal.history.v1 import schedule_service_pb2 as hpb

Context = grpc.aio.ServicerContext[Any, Any]
Answer = TypeVar("Answer", bound=Message)
MAX_SCHEDULE_ID_LENGTH = 200  # leaves room in a run's id for "-<slot>"
MAX_CATCHUP_SECONDS = 10 * 365 * 24 * 3600.0
POLICIES = ", ".join(
    name.removeprefix("SCHEDULE_OVERLAP_POLICY_")
    for name in spb.ScheduleOverlapPolicy.keys()  # noqa: SIM118 (an enum wrapper, not a dict)
    if not name.endswith("UNSPECIFIED")
)


def schedule_id(value: str) -> None:
    """A schedule id: printable, at most 200 characters, no surrounding spaces, no '@' first."""
    if not value:
        raise errors.invalid_argument("schedule_id is required")
    if len(value) > MAX_SCHEDULE_ID_LENGTH:
        raise errors.invalid_argument(
            f"schedule_id is {len(value)} characters long; the limit is {MAX_SCHEDULE_ID_LENGTH} "
            "(each run's workflow id is the schedule id followed by its slot time)"
        )
    if not value.isprintable() or value != value.strip() or value.startswith("@"):
        raise errors.invalid_argument(
            "schedule_id must be printable and must not start with '@' or start or end with "
            "whitespace"
        )


def note(value: str) -> None:
    if len(value) > validate.MAX_REASON_LENGTH:
        raise errors.invalid_argument(
            f"note is {len(value)} characters long; the limit is {validate.MAX_REASON_LENGTH}"
        )
    require_storable("note", value)


def spec(value: spb.ScheduleSpec) -> None:
    """A spec: a 5-field cron, or an interval with an optional offset (schedule_spec.parse)."""
    interval = seconds_of("spec.interval", value.interval) if value.HasField("interval") else None
    offset = seconds_of("spec.offset", value.offset) if value.HasField("offset") else 0.0
    schedule_spec.parse(value.cron, interval, offset)


def overlap_policy(value: int) -> None:
    if value not in spb.ScheduleOverlapPolicy.values():
        raise errors.invalid_argument(
            f"overlap_policy {value} is not a known ScheduleOverlapPolicy ({POLICIES})"
        )


def catchup_window(schedule: spb.Schedule) -> None:
    if not schedule.HasField("catchup_window"):
        return
    seconds = seconds_of("catchup_window", schedule.catchup_window)
    if not 1 <= seconds <= MAX_CATCHUP_SECONDS:
        raise errors.invalid_argument(
            f"catchup_window must be from 1 s to ten years, not {seconds:g}s (leave it unset "
            "for 60 s)"
        )


class ScheduleServicer(sgrpc.ScheduleServiceServicer):
    """Validates every request and answers bad input before anything is stored."""

    def __init__(self, router: Router, starts: WorkflowServicer, callers: Callers) -> None:
        self._router = router
        self._starts = starts  # checks an action's type as it checks a start's
        self._callers = callers

    async def _forward(
        self, rpc: str, request: Message, answer_type: type[Answer], cell: Cell | None = None
    ) -> Answer:
        """Hand a request to history's call of the same name, in the cell of the schedule it
        names (or `cell`)."""
        if cell is None:
            scoped: Any = request
            cell = await self._router.locate(SCHEDULE, scoped.namespace, scoped.schedule_id)
        wrapped = getattr(hpb, f"{rpc}Request")(request=request)
        answer = await cell.call(
            getattr(cell.schedules, rpc)(wrapped, timeout=DOWNSTREAM_TIMEOUT, metadata=vouched())
        )
        response = answer.response
        assert isinstance(response, answer_type)
        return response

    @errors.unary
    async def CreateSchedule(
        self, request: spb.CreateScheduleRequest, context: Context
    ) -> spb.CreateScheduleResponse:
        namespace = self._callers.admit(context, request.namespace)
        schedule = request.schedule
        schedule_id(schedule.schedule_id)
        spec(schedule.spec)
        overlap_policy(schedule.overlap_policy)
        catchup_window(schedule)
        note(schedule.note)
        if not schedule.HasField("action"):
            raise errors.invalid_argument("action is required: the run each slot starts")
        action = schedule.action
        if action.workflow_id or action.request_id:
            raise errors.invalid_argument(
                "leave action.workflow_id and action.request_id empty: each run's workflow id "
                "is '<schedule_id>-<slot time>'"
            )
        if action.namespace and action.namespace != namespace:
            raise errors.invalid_argument(
                f"action.namespace {action.namespace[:70]!r} is not the schedule's namespace "
                f"{namespace!r}: leave it empty"
            )
        try:
            started = validated_start(action, namespace)
            cell = await self._router.place(SCHEDULE, namespace, schedule.schedule_id)
            await self._starts.require_registered(cell, started)
        except errors.ApiError as error:
            if error.code == grpc.StatusCode.INVALID_ARGUMENT:
                error.message = f"action: {error.message}"
            raise
        started.workflow_id, started.namespace = "", ""
        stored = spb.CreateScheduleRequest(namespace=namespace, schedule=schedule)
        stored.schedule.action.CopyFrom(started)
        return await self._forward("CreateSchedule", stored, spb.CreateScheduleResponse, cell)

    @errors.unary
    async def DescribeSchedule(
        self, request: spb.DescribeScheduleRequest, context: Context
    ) -> spb.DescribeScheduleResponse:
        namespace = self._callers.admit(context, request.namespace)
        schedule_id(request.schedule_id)
        return await self._forward(
            "DescribeSchedule", in_namespace(request, namespace), spb.DescribeScheduleResponse
        )

    @errors.unary
    async def ListSchedules(
        self, request: spb.ListSchedulesRequest, context: Context
    ) -> spb.ListSchedulesResponse:
        namespace = self._callers.admit(context, request.namespace)
        validate.page_size(request.page_size)
        scoped = in_namespace(request, namespace)
        if self._router.single:
            validate.page_token(request.page_token)
            return await self._forward(
                "ListSchedules", scoped, spb.ListSchedulesResponse, self._router.home
            )

        async def page(cell: Cell, token: str, size: int) -> tuple[list[spb.ScheduleInfo], str]:
            asked = spb.ListSchedulesRequest(namespace=namespace, page_token=token, page_size=size)
            answer = await self._forward("ListSchedules", asked, spb.ListSchedulesResponse, cell)
            return list(answer.schedules), answer.next_page_token

        schedules, token = await merge.merged_page(
            self._router.cells,
            request.page_token,
            request.page_size,
            page,
            lambda info: info.create_time.ToNanoseconds(),  # oldest first, as in a cell
        )
        return spb.ListSchedulesResponse(schedules=schedules, next_page_token=token)

    @errors.unary
    async def PauseSchedule(
        self, request: spb.PauseScheduleRequest, context: Context
    ) -> spb.PauseScheduleResponse:
        namespace = self._callers.admit(context, request.namespace)
        schedule_id(request.schedule_id)
        note(request.note)
        return await self._forward(
            "PauseSchedule", in_namespace(request, namespace), spb.PauseScheduleResponse
        )

    @errors.unary
    async def UnpauseSchedule(
        self, request: spb.UnpauseScheduleRequest, context: Context
    ) -> spb.UnpauseScheduleResponse:
        namespace = self._callers.admit(context, request.namespace)
        schedule_id(request.schedule_id)
        note(request.note)
        return await self._forward(
            "UnpauseSchedule", in_namespace(request, namespace), spb.UnpauseScheduleResponse
        )

    @errors.unary
    async def TriggerSchedule(
        self, request: spb.TriggerScheduleRequest, context: Context
    ) -> spb.TriggerScheduleResponse:
        namespace = self._callers.admit(context, request.namespace)
        schedule_id(request.schedule_id)
        return await self._forward(
            "TriggerSchedule", in_namespace(request, namespace), spb.TriggerScheduleResponse
        )

    @errors.unary
    async def DeleteSchedule(
        self, request: spb.DeleteScheduleRequest, context: Context
    ) -> spb.DeleteScheduleResponse:
        namespace = self._callers.admit(context, request.namespace)
        schedule_id(request.schedule_id)
        return await self._forward(
            "DeleteSchedule", in_namespace(request, namespace), spb.DeleteScheduleResponse
        )
