"""The public ScheduleService as history serves it (the gateway validated the request first and
names the namespace it acts in)."""

from __future__ import annotations

from typing import Any

import grpc

from perdure.api.workflow.v1 import schedule_service_pb2 as spb
from perdure.common import auth, errors
from perdure.common.convert import seconds_of
from perdure.history.journal import Journal
from perdure.internal.history.v1 import schedule_service_pb2 as hpb
from perdure.internal.history.v1 import schedule_service_pb2_grpc as hgrpc

Context = grpc.aio.ServicerContext[Any, Any]
DEFAULT_CATCHUP_SECONDS = 60.0


class ScheduleServicer(hgrpc.HistoryScheduleServiceServicer):
    """HistoryScheduleService: each call in the namespace the gateway vouches for."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    @errors.unary
    async def CreateSchedule(
        self, request: hpb.CreateScheduleRequest, context: Context
    ) -> hpb.CreateScheduleResponse:
        r = request.request
        catchup = (
            seconds_of("catchup_window", r.schedule.catchup_window)
            if r.schedule.HasField("catchup_window")
            else DEFAULT_CATCHUP_SECONDS
        )
        info = await self._journal.create_schedule(
            auth.acting_namespace(r.namespace), r.schedule, catchup
        )
        return hpb.CreateScheduleResponse(response=spb.CreateScheduleResponse(schedule=info))

    @errors.unary
    async def DescribeSchedule(
        self, request: hpb.DescribeScheduleRequest, context: Context
    ) -> hpb.DescribeScheduleResponse:
        r = request.request
        info = await self._journal.describe_schedule(
            auth.acting_namespace(r.namespace), r.schedule_id
        )
        return hpb.DescribeScheduleResponse(response=spb.DescribeScheduleResponse(schedule=info))

    @errors.unary
    async def ListSchedules(
        self, request: hpb.ListSchedulesRequest, context: Context
    ) -> hpb.ListSchedulesResponse:
        r = request.request
        schedules, token = await self._journal.list_schedules(
            auth.acting_namespace(r.namespace), r.page_size, r.page_token
        )
        return hpb.ListSchedulesResponse(
            response=spb.ListSchedulesResponse(schedules=schedules, next_page_token=token)
        )

    @errors.unary
    async def PauseSchedule(
        self, request: hpb.PauseScheduleRequest, context: Context
    ) -> hpb.PauseScheduleResponse:
        r = request.request
        await self._journal.set_paused(
            auth.acting_namespace(r.namespace), r.schedule_id, True, r.note
        )
        return hpb.PauseScheduleResponse(response=spb.PauseScheduleResponse())

    @errors.unary
    async def UnpauseSchedule(
        self, request: hpb.UnpauseScheduleRequest, context: Context
    ) -> hpb.UnpauseScheduleResponse:
        r = request.request
        await self._journal.set_paused(
            auth.acting_namespace(r.namespace), r.schedule_id, False, r.note
        )
        return hpb.UnpauseScheduleResponse(response=spb.UnpauseScheduleResponse())

    @errors.unary
    async def TriggerSchedule(
        self, request: hpb.TriggerScheduleRequest, context: Context
    ) -> hpb.TriggerScheduleResponse:
        r = request.request
        action = await self._journal.trigger_schedule(
            auth.acting_namespace(r.namespace), r.schedule_id
        )
        return hpb.TriggerScheduleResponse(response=spb.TriggerScheduleResponse(action=action))

    @errors.unary
    async def DeleteSchedule(
        self, request: hpb.DeleteScheduleRequest, context: Context
    ) -> hpb.DeleteScheduleResponse:
        r = request.request
        await self._journal.delete_schedule(auth.acting_namespace(r.namespace), r.schedule_id)
        return hpb.DeleteScheduleResponse(response=spb.DeleteScheduleResponse())
