"""What every example checks of a run's input before using it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def input_fields(raw: Any, fields: Iterable[str]) -> dict[str, Any] | None:
    """`raw` as a JSON object of only `fields` (None for no input); raise ValueError saying
    what is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"the input must be a JSON object, not {type(raw).__name__}")
    expected = list(fields)
    unknown = sorted(set(raw) - set(expected))
    if unknown:
        raise ValueError(
            f"unknown input field(s) {', '.join(unknown)}; expected {', '.join(expected)}"
        )
    return raw
