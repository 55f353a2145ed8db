"""A remote step's retry policy: the default, its validation, and how it is stored and handed
to the step's executor. The executor computes each retry's delay from it (the SDK's
_retry.py); history makes the step task due again at that time (store.RECORD_STEP_TASK)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.common import errors
from perdure.common.convert import seconds_of

# A remote step's retry policy when its call sets none (as the SDKs' default).
DEFAULT_RETRY = jpb.RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=5,
)


def retry_policy(request: jpb.ScheduleStepRequest) -> dict[str, Any]:
    """The call's retry policy (the default when unset), validated, as stored."""
    retry = request.retry if request.HasField("retry") else DEFAULT_RETRY
    initial = seconds_of("retry.initial_interval", retry.initial_interval)
    maximum = seconds_of("retry.maximum_interval", retry.maximum_interval)
    if initial < 0 or maximum < 0:
        raise errors.invalid_argument("retry intervals must not be negative")
    if not retry.backoff_coefficient >= 1:
        raise errors.invalid_argument("retry.backoff_coefficient must be at least 1")
    if retry.maximum_attempts < 0:
        raise errors.invalid_argument("retry.maximum_attempts must be >= 0 (0: no limit)")
    return {
        "initial_interval": initial,
        "backoff_coefficient": retry.backoff_coefficient,
        "maximum_interval": maximum,
        "maximum_attempts": retry.maximum_attempts,
        "non_retryable_error_types": list(retry.non_retryable_error_types),
    }


def retry_message(stored: dict[str, Any]) -> jpb.RetryPolicy:
    """A stored retry policy as the message a step's executor loads."""
    return jpb.RetryPolicy(
        initial_interval=timedelta(seconds=stored["initial_interval"]),
        backoff_coefficient=stored["backoff_coefficient"],
        maximum_interval=timedelta(seconds=stored["maximum_interval"]),
        maximum_attempts=stored["maximum_attempts"],
        non_retryable_error_types=stored["non_retryable_error_types"],
    )
