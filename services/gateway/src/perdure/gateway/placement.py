"""Where a new run goes among the cells: rendezvous (highest random weight) hashing of
(namespace, key). A pure function of its arguments: the same id lands in the same cell on every
gateway, and adding a cell moves only the ids that the new cell wins (about 1/N of them) --
which the directory then keeps where they were anyway (see directory.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def weight(cell: str, namespace: str, key: str) -> int:
    """The cell's score for a key: 64 bits of SHA-256 over the three, each length-prefixed
    (no two different triples hash the same text)."""
    text = "".join(f"{len(part)}:{part}" for part in (cell, namespace, key))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def place(cells: Sequence[str], namespace: str, key: str) -> str:
    """The cell with the highest weight for (namespace, key); ties (never seen in 64 bits) go
    to the first name in sorted order."""
    if not cells:
        raise ValueError("no cells to place in")
    return max(sorted(cells), key=lambda cell: weight(cell, namespace, key))
