"""Cells in the gateway, without processes: where rendezvous hashing places ids (balance, and
how few move when a cell is added), the PERDURE_CELLS spelling, and merged pages."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import grpc
import pytest

from perdure.common import errors
from perdure.gateway import merge
from perdure.gateway.__main__ import parse_args
from perdure.gateway.cells import Cell, CellAddress, parse_cells
from perdure.gateway.placement import place
from perdure.worker import _cells as worker_cells

IDS = [f"order-{n}" for n in range(20_000)]


def test_ids_spread_evenly_over_the_cells() -> None:
    counts = Counter(place(["a", "b", "c", "d"], "default", key) for key in IDS)
    assert set(counts) == {"a", "b", "c", "d"}
    for count in counts.values():
        assert abs(count / len(IDS) - 0.25) < 0.02, counts


def test_adding_a_cell_moves_only_the_ids_the_new_cell_takes() -> None:
    before = {key: place(["a", "b", "c", "d"], "default", key) for key in IDS}
    after = {key: place(["a", "b", "c", "d", "e"], "default", key) for key in IDS}
    moved = [key for key in IDS if before[key] != after[key]]
    assert all(after[key] == "e" for key in moved)
    assert abs(len(moved) / len(IDS) - 0.2) < 0.02


def test_a_placement_depends_on_the_names_and_the_namespace_not_their_order() -> None:
    assert place(["b", "a"], "default", "x") == place(["a", "b"], "default", "x")
    spread = {place(["a", "b"], namespace, "same-id") for namespace in map(str, range(64))}
    assert spread == {"a", "b"}  # the namespace takes part


def test_cells_are_spelled_name_equals_history_slash_scheduler() -> None:
    assert parse_cells("a=h1:7401/s1:7402; b=ipv4:10.0.0.1:7401,10.0.0.2:7401/s2:7402\n") == [
        CellAddress("a", "h1:7401", "s1:7402"),
        CellAddress("b", "ipv4:10.0.0.1:7401,10.0.0.2:7401", "s2:7402"),
    ]
    for bad, said in [
        ("a=h1:7401,b=h2:7401/s2:7402", "name=history_address/scheduler_address"),
        ("a=h1:7401", "name=history_address/scheduler_address"),
        ("A=h/s", "lower-case"),
        ("a=h/s;a=h2/s2", "listed twice"),
        (" ; ", "no cells"),
    ]:
        with pytest.raises(ValueError, match=said):
            parse_cells(bad)
    assert worker_cells.parse_cells("a=h1:7401/s1:7402") == [
        worker_cells.Cell(history="h1:7401", scheduler="s1:7402", name="a")
    ]


def test_the_gateway_refuses_several_cells_without_a_directory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PERDURE_DIRECTORY_DATABASE_URL", raising=False)
    with pytest.raises(SystemExit):
        parse_args(["--cells", "a=h1:1/s1:2;b=h2:1/s2:2"])
    assert "PERDURE_DIRECTORY_DATABASE_URL" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--cells", "a=h1:1"])
    assert "--cells (PERDURE_CELLS): cell entry 'a=h1:1'" in capsys.readouterr().err
    assert parse_args(["--cells", "a=h1:1/s1:2"]).cell_addresses == [
        CellAddress("a", "h1:1", "s1:2")
    ]


def fake_cell(name: str) -> Cell:
    nothing: Any = None
    return Cell(name, nothing, nothing, nothing, nothing, named=True)


def test_merged_pages_list_every_item_once_in_order() -> None:
    # Each cell's items, newest (largest) first, paged by position as history pages.
    items = {
        "a": [100, 97, 50, 49, 48, 10],
        "b": [99, 98, 51, 1],
        "c": [],
        "d": [60, 59, 58, 57, 56, 55, 54],
    }
    cells = [fake_cell(name) for name in items]

    async def fetch(cell: Cell, token: str, size: int) -> tuple[list[int], str]:
        start = int(token) if token else 0
        chunk = items[cell.name][start : start + size]
        more = start + size < len(items[cell.name])
        return chunk, str(start + size) if more else ""

    async def pages(size: int) -> list[list[int]]:
        token, found = "", []
        while True:
            page, token = await merge.merged_page(cells, token, size, fetch, lambda n: -n)
            found.append(page)
            if not token:
                return found

    for size in (1, 3, 4, 100):
        listed = asyncio.run(pages(size))
        flat = [item for page in listed for item in page]
        assert flat == sorted((n for ns in items.values() for n in ns), reverse=True)
        assert all(len(page) <= size for page in listed)


def test_a_page_token_not_issued_is_refused() -> None:
    cells = [fake_cell("a"), fake_cell("b")]
    for token in ["nope", "m.bm9wZQ==", merge.encode({"zz": ""}), "p:1", "m." + "A" * 500]:
        with pytest.raises(errors.ApiError) as refused:
            merge.decode(token, cells)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert merge.decode(merge.encode({"a": None, "b": "x"}), cells) == {"a": None, "b": "x"}
    assert merge.encode({"a": None, "b": None}) == ""
