"""Page tokens: the `next_page_token` of an answer, passed back unchanged for the next page.

History issues "p:<position>" in URL-safe base64, 28 characters at most. Anything else could
never have been issued, and is refused whole, whatever its size, before it reaches a query
(the gateway checks too, so a forged token never travels further).
"""

from __future__ import annotations

import base64
import binascii
import re

from perdure.common import errors
from perdure.common.reasons import Reason

MAX_PAGE_TOKEN_LENGTH = 64
MAX_POSITION = 2**63 - 1  # a bigint
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_POSITION = re.compile(r"p:([0-9]{1,19})")


def encode_page_token(position: int) -> str:
    """An opaque token for the page after `position`."""
    return base64.urlsafe_b64encode(f"p:{position}".encode()).decode()


def decode_page_token(token: str) -> int | None:
    """The position a page token points after; None for the first page (no token).

    Raises:
        ApiError: INVALID_ARGUMENT (INVALID_PAGE_TOKEN) for a token that was never issued.
    """
    if not token:
        return None
    if len(token) > MAX_PAGE_TOKEN_LENGTH:
        raise _not_issued(
            f"page_token is {len(token)} characters long; a token is at most "
            f"{MAX_PAGE_TOKEN_LENGTH}"
        ) from None
    position = _position(token)
    if position is None or position > MAX_POSITION:
        raise _not_issued("page_token is not a token this service issued") from None
    return position


def _position(token: str) -> int | None:
    if not _BASE64URL.fullmatch(token):
        return None
    try:
        decoded = base64.urlsafe_b64decode(token).decode("ascii")
    except (binascii.Error, ValueError):
        return None
    matched = _POSITION.fullmatch(decoded)
    return int(matched.group(1)) if matched else None


def _not_issued(why: str) -> errors.ApiError:
    return errors.invalid_argument(
        f"{why}; pass the next_page_token of the previous answer unchanged",
        reason=Reason.INVALID_PAGE_TOKEN,
    )
