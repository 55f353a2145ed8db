"""Lists across cells: one page merged from every cell's, in a stable order, with a page token
that carries each cell's own position (the token that cell issued, or "done").

Each cell's answer is already in the list's order (newest first, say); the merge takes the
best head of all cells' pages in turn, so each cell's order is kept and every item is listed
exactly once across pages. Where a page took only part of a cell's answer, that cell is asked
once more, for just the part taken, to learn its token after it. (From a cell's first page, a
run started between the two asks shifts that token by one: the next page repeats one run.)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import heapq
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from perdure.common import errors
from perdure.common.reasons import Reason
from perdure.gateway.cells import Cell

Item = TypeVar("Item")
# One cell's page: (items, that cell's next page token, "" when it has no more).
Fetch = Callable[[Cell, str, int], Awaitable[tuple[list[Item], str]]]
DEFAULT_PAGE_SIZE = 100  # history's when a request gives none
_PREFIX = "m."
MAX_CELL_TOKEN_LENGTH = 64
MAX_TOKEN_PER_CELL = 2 * (MAX_CELL_TOKEN_LENGTH + 40)  # its name and position, in base64


def decode(token: str, cells: Sequence[Cell]) -> dict[str, str | None]:
    """Each cell's position: "" for its first page, its own token, or None when done. A cell
    the token does not name (added since) starts from its first page."""
    positions: dict[str, str | None] = {cell.name: "" for cell in cells}
    if not token:
        return positions
    try:
        # Refused whole, before decoding, when longer than any this gateway issues.
        if not token.startswith(_PREFIX) or len(token) > MAX_TOKEN_PER_CELL * len(cells):
            raise ValueError
        given = json.loads(base64.urlsafe_b64decode(token[len(_PREFIX) :]))
        if not isinstance(given, dict):
            raise ValueError
        for name, position in given.items():
            if name not in positions:
                raise ValueError
            if position is not None and (
                not isinstance(position, str) or len(position) > MAX_CELL_TOKEN_LENGTH
            ):
                raise ValueError
            positions[name] = position
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise errors.invalid_argument(
            "page_token is not a token this service issued (or names a cell this gateway "
            "is no longer configured with); pass the next_page_token of the previous answer "
            "unchanged",
            reason=Reason.INVALID_PAGE_TOKEN,
        ) from None
    return positions


def encode(positions: dict[str, str | None]) -> str:
    """The token of the next page; "" when every cell is done."""
    if all(position is None for position in positions.values()):
        return ""
    text = json.dumps(positions, separators=(",", ":"), sort_keys=True)
    return _PREFIX + base64.urlsafe_b64encode(text.encode()).decode()


async def merged_page(
    cells: Sequence[Cell],
    token: str,
    page_size: int,
    fetch: Fetch[Item],
    order: Callable[[Item], Any],
) -> tuple[list[Item], str]:
    """One page of at most `page_size` items over every cell, in `order` (smallest first; ties
    in cell order), and the next page's token. A cell that fails fails the page, naming it
    (a list that silently lacked a cell's runs would look complete)."""
    size = page_size or DEFAULT_PAGE_SIZE
    positions = decode(token, cells)
    live = [cell for cell in cells if positions[cell.name] is not None]

    async def page_of(cell: Cell, position: str, limit: int) -> tuple[list[Item], str]:
        with cell.reaching():
            return await fetch(cell, position, limit)

    pages = await asyncio.gather(
        *(page_of(cell, positions[cell.name] or "", size) for cell in live)
    )
    merged = heapq.merge(
        *([(order(item), index, item) for item in items] for index, (items, _) in enumerate(pages)),
        key=lambda entry: (entry[0], entry[1]),
    )
    taken: list[Item] = []
    counts = [0] * len(live)
    for _, index, item in merged:
        if len(taken) == size:
            break
        taken.append(item)
        counts[index] += 1
    partial = []
    for index, cell in enumerate(live):
        items, next_token = pages[index]
        if counts[index] == len(items):
            positions[cell.name] = next_token or None
        elif counts[index] > 0:
            partial.append((cell, counts[index]))
    # The token after the part taken, from the same position.
    tokens = await asyncio.gather(
        *(page_of(cell, positions[cell.name] or "", count) for cell, count in partial)
    )
    for (cell, _), (_, next_token) in zip(partial, tokens, strict=True):
        positions[cell.name] = next_token or None
    return taken, encode(positions)
