"""The gateway's request validation: every problem named precisely, with a stable reason."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.common.stream_names import stream_name
from perdure.gateway import validate
from tests.unit.api_errors import assert_invalid, rejected

# --- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "good", ["a", "_", "A1", "orders", "billing.v2:charge/card-3", "_private", "a" * 200]
)
def test_valid_names_pass(good: str) -> None:
    validate.name("workflow_type", good)


def test_empty_name_is_required() -> None:
    error = rejected(lambda: validate.name("task_queue", ""))
    assert_invalid(error, "task_queue is required")


@pytest.mark.parametrize(
    "bad",
    [
        "1starts_with_digit",
        "-dash",
        ".dot",
        "has space",
        "tab\there",
        "new\nline",
        "trailing\n",
        "semi;colon",
        "üml",
        "a" * 201,
    ],
)
def test_invalid_names_are_rejected_with_the_field(bad: str) -> None:
    error = rejected(lambda: validate.name("workflow_type", bad))
    assert_invalid(error, "workflow_type", "is not a valid name", "up to 200")


def test_invalid_name_message_quotes_at_most_50_characters() -> None:
    bad = "9" + "x" * 300
    error = rejected(lambda: validate.name("workflow_type", bad))
    assert repr(bad[:50]) in error.message
    assert bad[:51] not in error.message


# --- workflow ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "good", ["order-1", "x", "with inner spaces", "unicode-é-✓", "0" * validate.MAX_ID_LENGTH]
)
def test_valid_workflow_ids_pass(good: str) -> None:
    validate.workflow_id(good)


def test_workflow_id_required_by_default() -> None:
    error = rejected(lambda: validate.workflow_id(""))
    assert_invalid(error, "workflow_id is required")


def test_workflow_id_optional_when_not_required() -> None:
    validate.workflow_id("", required=False)


def test_optional_workflow_id_is_still_checked_when_given() -> None:
    error = rejected(lambda: validate.workflow_id(" padded", required=False))
    assert_invalid(error, "workflow_id")


def test_workflow_id_too_long_names_length_and_limit() -> None:
    error = rejected(lambda: validate.workflow_id("a" * 256))
    assert_invalid(error, "workflow_id is 256 characters long", "the limit is 255")


@pytest.mark.parametrize(
    "bad", [" leading", "trailing ", "\tleading-tab", "trailing-newline\n", "nul\x00", "bell\x07"]
)
def test_workflow_id_must_be_printable_without_surrounding_space(bad: str) -> None:
    error = rejected(lambda: validate.workflow_id(bad))
    assert_invalid(error, "workflow_id must be printable")


# --- page size and status filter -----------------------------------------------------------------


@pytest.mark.parametrize("good", [0, 1, 100, 1000])
def test_page_size_in_range_passes(good: int) -> None:
    validate.page_size(good)


@pytest.mark.parametrize("bad", [-1, 1001, 2**31 - 1])
def test_page_size_out_of_range_is_rejected(bad: int) -> None:
    error = rejected(lambda: validate.page_size(bad))
    assert_invalid(error, "page_size must be between 0 and 1000")


@pytest.mark.parametrize("good", sorted(wf.WorkflowStatus.values()))
def test_known_statuses_pass(good: int) -> None:
    validate.status_filter(good)


@pytest.mark.parametrize("bad", [-1, max(wf.WorkflowStatus.values()) + 1, 99])
def test_unknown_status_is_rejected(bad: int) -> None:
    error = rejected(lambda: validate.status_filter(bad))
    assert_invalid(error, f"status {bad} is not a known WorkflowStatus")


def test_a_nul_in_a_reason_or_a_key_is_refused() -> None:
    assert_invalid(rejected(lambda: validate.reason("stop\x00")), "reason", "NUL")
    assert_invalid(rejected(lambda: validate.state_key("ph\x00ase")), "key", "NUL")


# --- live reads ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("seconds", "nanos"), [(0, 0), (0, 500_000_000), (60, 0), (300, 0)])
def test_result_waits_up_to_5_minutes_pass(seconds: int, nanos: int) -> None:
    waited = validate.result_wait(Duration(seconds=seconds, nanos=nanos))
    assert waited == pytest.approx(seconds + nanos / 1e9)


@pytest.mark.parametrize("seconds", [-1, 301, 10**9])
def test_result_waits_outside_5_minutes_are_rejected(seconds: int) -> None:
    error = rejected(lambda: validate.result_wait(Duration(seconds=seconds)))
    assert_invalid(error, "wait must be 0 to 300 seconds")


@pytest.mark.parametrize(
    ("given", "used"), [("", "output"), ("notes", "notes"), ("x" * 200, "x" * 200)]
)
def test_stream_names_default_to_output(given: str, used: str) -> None:
    assert stream_name(given) == used


@pytest.mark.parametrize("bad", ["x" * 201, "tab\there", "new\nline", "nul\x00"])
def test_stream_names_are_1_to_200_printable_characters(bad: str) -> None:
    error = rejected(lambda: stream_name(bad))
    assert_invalid(error, "stream must be 1 to 200 printable characters")
