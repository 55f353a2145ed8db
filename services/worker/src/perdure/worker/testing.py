"""Check new workflow code against saved runs in a test, the way the replay gate does
(`perdure replay`, docs/worker-protocol.md §25): each saved history is replayed by the
worker's own engine, with no step run and nothing recorded, and non-determinism fails the test.

    from perdure.worker.testing import assert_replays
    import my_app.workflows

    def test_new_code_replays_recorded_runs() -> None:
        assert_replays(my_app.workflows, "tests/histories")

Save a run's history with `perdure workflow history ID --json > tests/histories/ID.json`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from perdure.worker._history import History
from perdure.worker._registry import WorkflowFunction
from perdure.worker._replay_check import Verdict, check_run, workflows_in

__all__ = ["History", "Verdict", "assert_replays", "replay"]

Code = ModuleType | WorkflowFunction | Iterable[ModuleType | WorkflowFunction]
T = TypeVar("T")


def replay(code: Code, history: History | str | Path | dict[str, Any]) -> Verdict:
    """Replay one saved history (a History, a file's path, or its JSON object) against `code`
    (a module, a @workflow function, or several); return how it went. AssertionError when the
    code does not replay it: non-determinism (with the position and the recorded and found
    calls), or a type `code` does not have."""
    verdict = _run(check_run(_workflows(code), _history(history)))
    if verdict.outcome != "passed":
        raise AssertionError(_described(verdict))
    return verdict


def assert_replays(code: Code, histories: str | Path | Iterable[str | Path]) -> list[Verdict]:
    """Replay every saved history (each *.json file of a directory, or the files given)
    against `code`; one AssertionError listing every run that does not replay."""
    paths = _paths(histories)
    if not paths:
        raise AssertionError(f"no saved histories (*.json) in {histories}")
    workflows = _workflows(code)
    verdicts = [_run(check_run(workflows, History.read(path))) for path in paths]
    checked = zip(paths, verdicts, strict=True)
    failed = [f"{path}: {_described(v)}" for path, v in checked if v.outcome != "passed"]
    if failed:
        raise AssertionError(
            f"{len(failed)} of {len(paths)} saved runs do not replay:\n" + "\n".join(failed)
        )
    return verdicts


def _workflows(code: Code) -> dict[str, WorkflowFunction]:
    if isinstance(code, ModuleType) or callable(code):
        return workflows_in(code)
    return workflows_in(*code)


def _history(history: History | str | Path | dict[str, Any]) -> History:
    if isinstance(history, History):
        return history
    if isinstance(history, dict):
        return History.from_json(history)
    return History.read(history)


def _paths(histories: str | Path | Iterable[str | Path]) -> list[Path]:
    if isinstance(histories, str | Path):
        given = Path(histories)
        return sorted(given.glob("*.json")) if given.is_dir() else [given]
    return [Path(path) for path in histories]


def _described(verdict: Verdict) -> str:
    run = f"run {verdict.run_id} of {verdict.workflow_id!r} ({verdict.workflow_type})"
    if verdict.outcome != "non_deterministic":
        return f"{run}: {verdict.outcome}: {verdict.detail}"
    return (
        f"{run} is non-deterministic at call #{verdict.position}: the journal recorded "
        f"{verdict.expected or 'nothing'}, the code made {verdict.found}\n  {verdict.detail}"
    )


def _run(check: Coroutine[Any, Any, T]) -> T:
    """Run a check to its end, also from a test that runs in an event loop already."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(check)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, check).result()
