from perdure.api.workflow.v1 import schedule_service_pb2 as _schedule_service_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateScheduleRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.CreateScheduleRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.CreateScheduleRequest, _Mapping]] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.CreateScheduleResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.CreateScheduleResponse, _Mapping]] = ...) -> None: ...

class DescribeScheduleRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.DescribeScheduleRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.DescribeScheduleRequest, _Mapping]] = ...) -> None: ...

class DescribeScheduleResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.DescribeScheduleResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.DescribeScheduleResponse, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.ListSchedulesRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.ListSchedulesRequest, _Mapping]] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.ListSchedulesResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.ListSchedulesResponse, _Mapping]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.PauseScheduleRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.PauseScheduleRequest, _Mapping]] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.PauseScheduleResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.PauseScheduleResponse, _Mapping]] = ...) -> None: ...

class UnpauseScheduleRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.UnpauseScheduleRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.UnpauseScheduleRequest, _Mapping]] = ...) -> None: ...

class UnpauseScheduleResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.UnpauseScheduleResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.UnpauseScheduleResponse, _Mapping]] = ...) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.TriggerScheduleRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.TriggerScheduleRequest, _Mapping]] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.TriggerScheduleResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.TriggerScheduleResponse, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _schedule_service_pb2.DeleteScheduleRequest
    def __init__(self, request: _Optional[_Union[_schedule_service_pb2.DeleteScheduleRequest, _Mapping]] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: _schedule_service_pb2.DeleteScheduleResponse
    def __init__(self, response: _Optional[_Union[_schedule_service_pb2.DeleteScheduleResponse, _Mapping]] = ...) -> None: ...
