import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from perdure.api.workflow.v1 import workflow_service_pb2 as _workflow_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScheduleOverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULE_OVERLAP_POLICY_UNSPECIFIED: _ClassVar[ScheduleOverlapPolicy]
    SCHEDULE_OVERLAP_POLICY_SKIP: _ClassVar[ScheduleOverlapPolicy]
    SCHEDULE_OVERLAP_POLICY_BUFFER_ONE: _ClassVar[ScheduleOverlapPolicy]
    SCHEDULE_OVERLAP_POLICY_ALLOW_ALL: _ClassVar[ScheduleOverlapPolicy]
    SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER: _ClassVar[ScheduleOverlapPolicy]
SCHEDULE_OVERLAP_POLICY_UNSPECIFIED: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_SKIP: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_BUFFER_ONE: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_ALLOW_ALL: ScheduleOverlapPolicy
SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER: ScheduleOverlapPolicy

class ScheduleSpec(_message.Message):
    __slots__ = ("cron", "interval", "offset")
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    cron: str
    interval: _duration_pb2.Duration
    offset: _duration_pb2.Duration
    def __init__(self, cron: _Optional[str] = ..., interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., offset: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("schedule_id", "spec", "action", "overlap_policy", "catchup_window", "paused", "note")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_POLICY_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    spec: ScheduleSpec
    action: _workflow_service_pb2.StartWorkflowRequest
    overlap_policy: ScheduleOverlapPolicy
    catchup_window: _duration_pb2.Duration
    paused: bool
    note: str
    def __init__(self, schedule_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., action: _Optional[_Union[_workflow_service_pb2.StartWorkflowRequest, _Mapping]] = ..., overlap_policy: _Optional[_Union[ScheduleOverlapPolicy, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., paused: _Optional[bool] = ..., note: _Optional[str] = ...) -> None: ...

class ScheduleAction(_message.Message):
    __slots__ = ("slot_time", "workflow_id", "run_id", "start_time", "triggered")
    SLOT_TIME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    slot_time: _timestamp_pb2.Timestamp
    workflow_id: str
    run_id: str
    start_time: _timestamp_pb2.Timestamp
    triggered: bool
    def __init__(self, slot_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., workflow_id: _Optional[str] = ..., run_id: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., triggered: _Optional[bool] = ...) -> None: ...

class ScheduleInfo(_message.Message):
    __slots__ = ("schedule", "next_fire_times", "recent_actions", "action_count", "skipped_count", "missed_count", "buffered_slot_time", "create_time", "update_time")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    RECENT_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ACTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MISSED_COUNT_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_SLOT_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    next_fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    recent_actions: _containers.RepeatedCompositeFieldContainer[ScheduleAction]
    action_count: int
    skipped_count: int
    missed_count: int
    buffered_slot_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., next_fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., recent_actions: _Optional[_Iterable[_Union[ScheduleAction, _Mapping]]] = ..., action_count: _Optional[int] = ..., skipped_count: _Optional[int] = ..., missed_count: _Optional[int] = ..., buffered_slot_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "namespace")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    namespace: str
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., namespace: _Optional[str] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: ScheduleInfo
    def __init__(self, schedule: _Optional[_Union[ScheduleInfo, _Mapping]] = ...) -> None: ...

class DescribeScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "namespace")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    namespace: str
    def __init__(self, schedule_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class DescribeScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: ScheduleInfo
    def __init__(self, schedule: _Optional[_Union[ScheduleInfo, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "namespace")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    namespace: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_page_token")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[ScheduleInfo]
    next_page_token: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[ScheduleInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "namespace", "note")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    namespace: str
    note: str
    def __init__(self, schedule_id: _Optional[str] = ..., namespace: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UnpauseScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "namespace", "note")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    namespace: str
    note: str
    def __init__(self, schedule_id: _Optional[str] = ..., namespace: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class UnpauseScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "namespace")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    namespace: str
    def __init__(self, schedule_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ("action",)
    ACTION_FIELD_NUMBER: _ClassVar[int]
    action: ScheduleAction
    def __init__(self, action: _Optional[_Union[ScheduleAction, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "namespace")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    namespace: str
    def __init__(self, schedule_id: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
