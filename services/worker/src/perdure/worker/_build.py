"""The worker's build id (Hello.build_id): the operator's (`build_id=`, `--build-id`,
PERDURE_BUILD_ID), or derived from the code it serves, so that a change to that code is a new
build. Routing policies send a type's runs to the right build (docs/worker-protocol.md §23)."""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

BUILD_ID_ENV = "PERDURE_BUILD_ID"
MAX_BUILD_ID = 64  # characters, printable, checked by the scheduler as well
DERIVED_LENGTH = 12  # hex digits of the SHA-256


def build_id_of(explicit: str | None, functions: Iterable[Callable[..., Any]]) -> str:
    """The build id to declare: `explicit`, else PERDURE_BUILD_ID, else derived from the source
    of the modules that define `functions`."""
    chosen = explicit if explicit is not None else os.environ.get(BUILD_ID_ENV)
    if chosen:
        if len(chosen) > MAX_BUILD_ID or not chosen.isprintable() or chosen != chosen.strip():
            raise ValueError(
                f"build_id must be at most {MAX_BUILD_ID} printable characters with no space at "
                f"either end, not {chosen[:70]!r}"
            )
        return chosen
    return derived_build_id(functions)


def derived_build_id(functions: Iterable[Callable[..., Any]]) -> str:
    """12 hex digits of the SHA-256 over the source files of the modules that define
    `functions` (in module order), so that any change to that code changes it. A module
    without a readable source contributes its name only."""
    digest = hashlib.sha256()
    for name in sorted({_module_of(fn) for fn in functions}):
        digest.update(name.encode() + b"\0")
        digest.update(_source(name) + b"\0")
    return digest.hexdigest()[:DERIVED_LENGTH]


def _module_of(fn: Callable[..., Any]) -> str:
    return getattr(inspect.unwrap(fn), "__module__", None) or "__main__"


def _source(module_name: str) -> bytes:
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None) if module is not None else None
    if not path:
        return b""
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError:
        return b""
