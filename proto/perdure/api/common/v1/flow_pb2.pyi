from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BudgetExceededAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUDGET_EXCEEDED_ACTION_UNSPECIFIED: _ClassVar[BudgetExceededAction]
    BUDGET_EXCEEDED_ACTION_WAIT: _ClassVar[BudgetExceededAction]
    BUDGET_EXCEEDED_ACTION_FAIL: _ClassVar[BudgetExceededAction]

class BudgetPeriod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BUDGET_PERIOD_UNSPECIFIED: _ClassVar[BudgetPeriod]
    BUDGET_PERIOD_NONE: _ClassVar[BudgetPeriod]
    BUDGET_PERIOD_HOUR: _ClassVar[BudgetPeriod]
    BUDGET_PERIOD_DAY: _ClassVar[BudgetPeriod]
    BUDGET_PERIOD_WEEK: _ClassVar[BudgetPeriod]
    BUDGET_PERIOD_MONTH: _ClassVar[BudgetPeriod]
BUDGET_EXCEEDED_ACTION_UNSPECIFIED: BudgetExceededAction
BUDGET_EXCEEDED_ACTION_WAIT: BudgetExceededAction
BUDGET_EXCEEDED_ACTION_FAIL: BudgetExceededAction
BUDGET_PERIOD_UNSPECIFIED: BudgetPeriod
BUDGET_PERIOD_NONE: BudgetPeriod
BUDGET_PERIOD_HOUR: BudgetPeriod
BUDGET_PERIOD_DAY: BudgetPeriod
BUDGET_PERIOD_WEEK: BudgetPeriod
BUDGET_PERIOD_MONTH: BudgetPeriod

class Usage(_message.Message):
    __slots__ = ("units", "cost_micros")
    UNITS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    units: int
    cost_micros: int
    def __init__(self, units: _Optional[int] = ..., cost_micros: _Optional[int] = ...) -> None: ...

class StepUsage(_message.Message):
    __slots__ = ("usage", "model")
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    usage: Usage
    model: str
    def __init__(self, usage: _Optional[_Union[Usage, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class Budget(_message.Message):
    __slots__ = ("units", "cost_micros")
    UNITS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    units: int
    cost_micros: int
    def __init__(self, units: _Optional[int] = ..., cost_micros: _Optional[int] = ...) -> None: ...

class RunFlow(_message.Message):
    __slots__ = ("keys", "priority", "fairness_key", "budget", "on_budget_exceeded")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    ON_BUDGET_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    priority: int
    fairness_key: str
    budget: Budget
    on_budget_exceeded: BudgetExceededAction
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., priority: _Optional[int] = ..., fairness_key: _Optional[str] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., on_budget_exceeded: _Optional[_Union[BudgetExceededAction, str]] = ...) -> None: ...

class RunFlowStatus(_message.Message):
    __slots__ = ("settings", "reserved", "spent", "refusals")
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    RESERVED_FIELD_NUMBER: _ClassVar[int]
    SPENT_FIELD_NUMBER: _ClassVar[int]
    REFUSALS_FIELD_NUMBER: _ClassVar[int]
    settings: RunFlow
    reserved: Usage
    spent: Usage
    refusals: int
    def __init__(self, settings: _Optional[_Union[RunFlow, _Mapping]] = ..., reserved: _Optional[_Union[Usage, _Mapping]] = ..., spent: _Optional[_Union[Usage, _Mapping]] = ..., refusals: _Optional[int] = ...) -> None: ...

class StepFlow(_message.Message):
    __slots__ = ("keys", "estimate")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    estimate: Usage
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., estimate: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...
