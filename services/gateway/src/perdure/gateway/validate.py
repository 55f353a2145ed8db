"""Validation of public requests: every problem is named precisely, before anything is written."""

from __future__ import annotations

import re

from google.protobuf import duration_pb2

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.common import errors
from perdure.common.convert import seconds_of
from perdure.common.page_tokens import decode_page_token
from perdure.common.text import require_storable

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]{0,199}")
MAX_ID_LENGTH = 255
MAX_PAGE_SIZE = 1000
DEFAULT_TASK_QUEUE = "default"
MAX_EXECUTION_TIMEOUT = 10 * 365 * 24 * 3600.0  # ten years, in seconds


def name(field: str, value: str) -> None:
    """A workflow type or task queue name."""
    if not value:
        raise errors.invalid_argument(f"{field} is required")
    if not NAME_PATTERN.fullmatch(value):
        raise errors.invalid_argument(
            f"{field} {value[:50]!r} is not a valid name: use up to 200 letters, digits or "
            "_ . : / -, starting with a letter or _"
        )


def workflow_id(value: str, *, required: bool = True, field: str = "workflow_id") -> None:
    """A workflow id: printable, without surrounding spaces, at most 255 characters."""
    if not value:
        if required:
            raise errors.invalid_argument(f"{field} is required")
        return
    if len(value) > MAX_ID_LENGTH:
        raise errors.invalid_argument(
            f"{field} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    if not value.isprintable() or value != value.strip() or value.startswith("@"):
        raise errors.invalid_argument(
            f"{field} must be printable and must not start with '@' or start or end with whitespace"
        )


def workflow_id_prefix(value: str) -> None:
    """The start of workflow ids: printable, at most 255 characters, not starting with '@'."""
    if len(value) > MAX_ID_LENGTH or not value.isprintable() or value.startswith("@"):
        raise errors.invalid_argument(
            f"workflow_id_prefix must be printable, at most {MAX_ID_LENGTH} characters and "
            "must not start with '@'"
        )


def event_id(field: str, value: int) -> None:
    """An event id to read after: 0 (from the start) or more."""
    if value < 0:
        raise errors.invalid_argument(f"{field} must be 0 or more, not {value}")


def page_size(value: int) -> None:
    """A page size: 0 for the default, at most 1000."""
    if not 0 <= value <= MAX_PAGE_SIZE:
        raise errors.invalid_argument(f"page_size must be between 0 and {MAX_PAGE_SIZE}")


def page_token(value: str) -> None:
    """A page token: empty for the first page, else one this service issued."""
    decode_page_token(value)


def status_filter(value: int) -> None:
    """A workflow status filter: unset or a known status."""
    if value not in wf.WorkflowStatus.values():
        raise errors.invalid_argument(f"status {value} is not a known WorkflowStatus")


MAX_REASON_LENGTH = 1000
MAX_KEY_LENGTH = 200


def signal_id(value: str) -> None:
    """An optional signal id: printable, at most 255 characters."""
    optional_id("signal_id", value)


def optional_id(field: str, value: str) -> None:
    """An optional id (a signal's, a start request's, a run's): printable, at most 255
    characters."""
    if value and (len(value) > MAX_ID_LENGTH or not value.isprintable()):
        raise errors.invalid_argument(
            f"{field} must be printable and at most {MAX_ID_LENGTH} characters"
        )


def id_reuse_policy(value: int) -> None:
    """A start's IdReusePolicy: unset or a known one."""
    if value not in api.IdReusePolicy.values():
        raise errors.invalid_argument(
            f"id_reuse_policy {value} is not a known IdReusePolicy (REFUSE, ALLOW, ALLOW_IF_FAILED)"
        )


def reason(value: str) -> None:
    """A free-text reason for the journal."""
    if len(value) > MAX_REASON_LENGTH:
        raise errors.invalid_argument(
            f"reason is {len(value)} characters long; the limit is {MAX_REASON_LENGTH}"
        )
    require_storable("reason", value)


def state_key(value: str) -> None:
    """A key published with ctx.set_state."""
    if not value:
        raise errors.invalid_argument("key is required")
    if len(value) > MAX_KEY_LENGTH:
        raise errors.invalid_argument(f"key is longer than {MAX_KEY_LENGTH} characters")
    require_storable("key", value)


def execution_timeout(value: duration_pb2.Duration) -> None:
    """A run's execution timeout: positive, and at most ten years."""
    seconds = seconds_of("execution_timeout", value)
    if not 0 < seconds <= MAX_EXECUTION_TIMEOUT:
        raise errors.invalid_argument(
            f"execution_timeout must be more than 0 and at most ten years, not {seconds}s "
            "(leave it unset for no limit)"
        )


MAX_DEBOUNCE_WINDOW = 24 * 3600.0  # a day, in seconds


def start_keys(start: api.StartWorkflowRequest) -> None:
    """A start's debounce key and window (both or neither) and singleton key."""
    optional_id("debounce_key", start.debounce_key)
    optional_id("singleton_key", start.singleton_key)
    has_window = start.HasField("debounce_window")
    if start.debounce_key and not has_window:
        raise errors.invalid_argument(
            "debounce_key needs debounce_window: how long the run waits for more starts"
        )
    if has_window and not start.debounce_key:
        raise errors.invalid_argument(
            "debounce_window needs debounce_key: the key whose starts are debounced"
        )
    if has_window:
        seconds = seconds_of("debounce_window", start.debounce_window)
        if not 0 < seconds <= MAX_DEBOUNCE_WINDOW:
            raise errors.invalid_argument(
                f"debounce_window must be more than 0 and at most one day, not {seconds}s"
            )


MAX_OVERRIDES = 100


def reset_point(step_id: str, event_id: int) -> None:
    """Where a reset starts again: a step id or an event id, exactly one."""
    if bool(step_id) == bool(event_id):
        raise errors.invalid_argument(
            "set exactly one of step_id (the step to run again) and event_id (the first "
            "event not copied)"
        )
    optional_id("step_id", step_id)
    if event_id and event_id < 2:
        raise errors.invalid_argument(
            f"event_id must be 2 or more (WORKFLOW_STARTED is always kept), not {event_id}"
        )


def override_step_ids(step_ids: list[str]) -> None:
    """The steps a fork's overrides name: at most MAX_OVERRIDES ids, each non-empty."""
    if len(step_ids) > MAX_OVERRIDES:
        raise errors.invalid_argument(
            f"overrides names {len(step_ids)} steps; the limit is {MAX_OVERRIDES}"
        )
    for step_id in step_ids:
        if not step_id:
            raise errors.invalid_argument("an override's step id is empty: name a step id")
        optional_id("an override's step id", step_id)


MAX_RESULT_WAIT = 300.0  # seconds a GetWorkflowResult may wait


def result_wait(value: duration_pb2.Duration) -> float:
    """How long a GetWorkflowResult waits: 0 (answer at once) to 5 minutes."""
    seconds = seconds_of("wait", value)
    if not 0 <= seconds <= MAX_RESULT_WAIT:
        raise errors.invalid_argument(
            f"wait must be 0 to {MAX_RESULT_WAIT:g} seconds (5 minutes), not {seconds:g}; "
            "call again to wait longer"
        )
    return seconds
