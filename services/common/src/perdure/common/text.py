"""Text PostgreSQL can store (no U+0000, NUL, in a text column or in JSON), and names callers
chose made safe to show in a log line."""

from __future__ import annotations

import unicodedata

from perdure.common import errors

NUL = "\x00"


def require_storable(field: str, value: str) -> None:
    """Refuse a request string that cannot be stored, naming the field."""
    if NUL in value:
        raise errors.invalid_argument(f"{field} contains U+0000 (NUL), which cannot be stored")


def storable(value: str) -> str:
    """Free text (an error message) made storable: each NUL becomes U+FFFD."""
    return value.replace(NUL, "\ufffd")


# What a log line shows of a name a caller chose (a worker's identity, a task queue, an id).
MAX_SHOWN = 200
# Control characters (newlines, ESC of ANSI sequences), format characters (bidirectional
# overrides) and line or paragraph separators: each could forge or hide log lines.
_UNSHOWABLE = frozenset({"Cc", "Cf", "Zl", "Zp"})


def printable(value: str, limit: int = MAX_SHOWN) -> str:
    """A name a caller sent, safe for one log line: every control or format character becomes
    a visible escape (a newline shows as \\n, ESC as \\x1b) and the text is cut at `limit`
    characters, the cut marked with an ellipsis."""
    shown = "".join(_escaped(char) for char in value[: limit + 1])
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def _escaped(char: str) -> str:
    if unicodedata.category(char) in _UNSHOWABLE:
        return char.encode("unicode_escape").decode("ascii")
    return char
