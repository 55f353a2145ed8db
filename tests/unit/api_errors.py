"""Assertions on the ApiError a check raises."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from perdure.common.errors import ApiError


def rejected(check: Callable[[], object]) -> ApiError:
    """Run a check that must fail and return its error."""
    with pytest.raises(ApiError) as caught:
        check()
    return caught.value


def assert_invalid(error: ApiError, *fragments: str) -> None:
    """The error is INVALID_ARGUMENT/INVALID_REQUEST and its message names every fragment."""
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "INVALID_REQUEST"
    for fragment in fragments:
        assert fragment in error.message, (fragment, error.message)
