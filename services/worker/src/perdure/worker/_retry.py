"""RetryPolicy: how often and how soon a failed step is tried again."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from perdure.api.worker.v1 import journal_service_pb2 as jpb


@dataclass(frozen=True)
class RetryPolicy:
    """A step's retry schedule. Attempt n (n >= 1) that fails is retried after
    `min(initial_interval * backoff_coefficient ** (n - 1), maximum_interval)` seconds, measured
    on the database clock, until `maximum_attempts` attempts have failed (0: no limit). Errors
    whose class (or a base class) is named in `non_retryable_error_types` are never retried.

    The wait is journaled: the worker lets go of the workflow, and any worker picks it up when
    the retry is due, even after every process restarted.
    """

    initial_interval: float = 1.0
    backoff_coefficient: float = 2.0
    maximum_interval: float = 60.0
    maximum_attempts: int = 5
    non_retryable_error_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.initial_interval) and self.initial_interval >= 0):
            raise ValueError("initial_interval must be a finite number of seconds >= 0")
        if not (math.isfinite(self.backoff_coefficient) and self.backoff_coefficient >= 1):
            raise ValueError("backoff_coefficient must be >= 1")
        if not (math.isfinite(self.maximum_interval) and self.maximum_interval >= 0):
            raise ValueError("maximum_interval must be a finite number of seconds >= 0")
        if self.maximum_attempts < 0:
            raise ValueError("maximum_attempts must be >= 0 (0 means unlimited)")
        if isinstance(self.non_retryable_error_types, str):
            raise ValueError("non_retryable_error_types is a tuple of class names, not a str")

    def delay(self, attempt: int) -> float:
        """Seconds between the failure of `attempt` and the next attempt."""
        exponent = min(attempt - 1, 1000)  # large enough to hit any maximum, small enough to fit
        return float(
            min(self.initial_interval * self.backoff_coefficient**exponent, self.maximum_interval)
        )

    def retries(self, error: BaseException, attempt: int) -> bool:
        """Whether a failure of `attempt` with `error` is tried again."""
        if self.maximum_attempts and attempt >= self.maximum_attempts:
            return False
        names = {cls.__name__ for cls in type(error).__mro__}
        return names.isdisjoint(self.non_retryable_error_types)

    def to_message(self) -> jpb.RetryPolicy:
        """The policy as the worker protocol carries it (a remote step's call)."""
        return jpb.RetryPolicy(
            initial_interval=timedelta(seconds=self.initial_interval),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval=timedelta(seconds=self.maximum_interval),
            maximum_attempts=self.maximum_attempts,
            non_retryable_error_types=list(self.non_retryable_error_types),
        )

    @classmethod
    def from_message(cls, message: jpb.RetryPolicy) -> RetryPolicy:
        """The policy a remote step was called with (LoadStepResponse.retry)."""
        return cls(
            initial_interval=message.initial_interval.ToTimedelta().total_seconds(),
            backoff_coefficient=message.backoff_coefficient,
            maximum_interval=message.maximum_interval.ToTimedelta().total_seconds(),
            maximum_attempts=message.maximum_attempts,
            non_retryable_error_types=tuple(message.non_retryable_error_types),
        )


NO_RETRY = RetryPolicy(maximum_attempts=1)
