"""The worker's build id: the operator's, or derived from the source of the modules defining
its workflows and steps, so that any change to that code is a new build."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from perdure.worker import Worker
from perdure.worker._build import BUILD_ID_ENV, build_id_of, derived_build_id

SOURCE = """
from perdure.worker import workflow

@workflow
async def flow(ctx, args):
    return await ctx.step("{step}", lambda: 1)
"""


@pytest.fixture
def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """Write a module of one workflow (its step named as given) and import it afresh."""
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded: list[str] = []

    def module(step: str) -> ModuleType:
        (tmp_path / "deployed_flow.py").write_text(SOURCE.format(step=step))
        sys.modules.pop("deployed_flow", None)
        importlib.invalidate_caches()
        loaded.append("deployed_flow")
        return importlib.import_module("deployed_flow")

    yield module
    for name in loaded:
        sys.modules.pop(name, None)


def test_a_derived_build_id_changes_with_the_code(
    load: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BUILD_ID_ENV, raising=False)
    first = load("charge")
    derived = Worker([first.flow]).build_id
    assert len(derived) == 12 and int(derived, 16) >= 0
    assert derived_build_id([first.flow]) == derived  # the same code, the same build
    changed = load("refund")
    assert Worker([changed.flow]).build_id != derived


def test_an_explicit_build_id_wins_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUILD_ID_ENV, "from-env")
    assert build_id_of("v2", []) == "v2"
    assert build_id_of(None, []) == "from-env"
    for bad in ("x" * 65, "a\nb", " padded"):
        with pytest.raises(ValueError, match="at most 64 printable characters"):
            build_id_of(bad, [])
