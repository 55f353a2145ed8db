"""A worker serving several cells: one session per cell (its scheduler and history), so a cell
that is down costs only its own runs. PERDURE_CELLS spells the cells as the gateway's does:
`name=history_address/scheduler_address` entries separated by ';'."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    """One cell's services, as a worker reaches them."""

    history: str
    scheduler: str
    name: str = ""


def parse_cells(text: str) -> list[Cell]:
    """`a=historyA:7401/schedulerA:7402;b=...` as a list; ValueError saying what to fix."""
    cells: list[Cell] = []
    for entry in (part.strip() for part in re.split(r"[;\n]", text)):
        if not entry:
            continue
        name, equals, addresses = entry.partition("=")
        parts = [part.strip() for part in addresses.split("/")]
        bad = not equals or not name.strip() or "=" in addresses
        if bad or len(parts) != 2 or not all(parts):
            raise ValueError(
                f"cell entry {entry!r} is not name=history_address/scheduler_address (for "
                "example a=10.0.0.1:7401/10.0.0.1:7402); separate cells with ';'"
            )
        cells.append(Cell(history=parts[0], scheduler=parts[1], name=name.strip()))
    if not cells:
        raise ValueError("no cells: give name=history/scheduler entries separated by ';'")
    return cells
