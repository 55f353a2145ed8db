"""Text PostgreSQL can store: no U+0000 (NUL), in a text column or in JSON."""

from __future__ import annotations

from perdure.common import errors

NUL = "\x00"


def require_storable(field: str, value: str) -> None:
    """Refuse a request string that cannot be stored, naming the field."""
    if NUL in value:
        raise errors.invalid_argument(f"{field} contains U+0000 (NUL), which cannot be stored")


def storable(value: str) -> str:
    """Free text (an error message) made storable: each NUL becomes U+FFFD."""
    return value.replace(NUL, "\ufffd")
