"""A run's stream names (current_step().emit(chunk, stream=...), ReadStream): one rule for the
worker that emits and the client that reads."""

from __future__ import annotations

from perdure.common import errors
from perdure.common.text import require_storable

DEFAULT_STREAM = "output"
MAX_STREAM_NAME = 200


def stream_name(name: str) -> str:
    """The stream a request names ("" is the default, "output"), validated."""
    if not name:
        return DEFAULT_STREAM
    if len(name) > MAX_STREAM_NAME or not name.isprintable():
        raise errors.invalid_argument(
            f"stream must be 1 to {MAX_STREAM_NAME} printable characters (empty: "
            f"{DEFAULT_STREAM!r}), not {len(name)} characters"
        )
    require_storable("stream", name)
    return name
