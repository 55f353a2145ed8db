"""History's enums mirror the proto enums (and the outcome oneof) they store: the same names
both ways, each without its proto prefix."""

from __future__ import annotations

import re
from enum import StrEnum

import pytest
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.history import chains, deadlines, fencing, outbox, store, stranded
from perdure.history.model import EventType, Outcome, RunStatus, WaitKind, sql_list


@pytest.mark.parametrize(
    ("enum", "proto", "prefix"),
    [
        (RunStatus, wf.WorkflowStatus, "WORKFLOW_STATUS_"),
        (EventType, wf.EventType, "EVENT_TYPE_"),
        (WaitKind, wf.WaitKind, "WAIT_KIND_"),
    ],
)
def test_enum_mirrors_its_proto_enum(
    enum: type[StrEnum], proto: EnumTypeWrapper, prefix: str
) -> None:
    names = proto.DESCRIPTOR.values_by_name
    proto_names = {name.removeprefix(prefix) for name in names} - {"UNSPECIFIED"}
    assert {member.name for member in enum} == proto_names
    assert all(member.value == member.name for member in enum)
    for member in enum:
        assert proto.Value(prefix + member.value)  # and never the UNSPECIFIED zero


def test_outcome_mirrors_the_finish_oneof() -> None:
    oneof = jpb.FinishWorkflowRequest.DESCRIPTOR.oneofs_by_name["outcome"]
    assert {field.name for field in oneof.fields} == {member.value for member in Outcome}


def test_each_outcome_closes_with_a_closed_status() -> None:
    assert {outcome.status for outcome in Outcome} == {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.PARKED,
        RunStatus.CANCELLED,
        RunStatus.CONTINUED_AS_NEW,
    }
    for outcome in Outcome:
        assert EventType(f"WORKFLOW_{outcome.status}")


def test_status_proto_name() -> None:
    assert RunStatus.WAITING.proto == "WORKFLOW_STATUS_WAITING"
    assert wf.WorkflowStatus.Value(RunStatus.WAITING.proto) == wf.WORKFLOW_STATUS_WAITING


def test_sql_list_quotes_plain_names_only() -> None:
    assert sql_list([RunStatus.RUNNING]) == "('RUNNING')"
    with pytest.raises(ValueError, match="plain names"):
        sql_list([])


def test_every_status_event_type_and_wait_kind_the_sql_spells_is_a_member() -> None:
    """History's statements spell statuses, event types and wait kinds as SQL literals (so that
    each statement's text, and the planner's plan, stays as it is): each must be one of the
    enums', or a renamed member would leave a statement matching nothing."""
    members = {member.value for enum in (RunStatus, EventType, WaitKind) for member in enum}
    spelt = {
        literal
        for module in (store, deadlines, stranded, outbox, fencing, chains)
        for value in vars(module).values()
        if isinstance(value, str)
        for literal in re.findall(r"'([A-Z][A-Z_]+)'", value)
    }
    assert spelt and spelt <= members, spelt - members


def test_the_id_reuse_policy_mirrors_its_proto_enum() -> None:
    assert {
        f"ID_REUSE_POLICY_{member.name}": member.value for member in chains.IdReusePolicy
    } == dict(api.IdReusePolicy.items())
