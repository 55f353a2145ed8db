"""docs/configuration.md lists every PERDURE_* setting the services, the SDKs and the CLI read."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("services", "sdk/node/src", "examples")


def settings_read() -> set[str]:
    found: set[str] = set()
    for root in SOURCES:
        for path in (REPO / root).rglob("*"):
            if path.suffix in {".py", ".js", ".mjs"} and "node_modules" not in path.parts:
                found.update(re.findall(r"PERDURE_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text()))
    # A prefix cut at an underscore ("PERDURE_TLS_" in a message) is not a setting.
    return {name for name in found if not any(o.startswith(name + "_") for o in found)}


def test_every_setting_is_documented() -> None:
    documented = (REPO / "docs" / "configuration.md").read_text()
    names = settings_read()
    assert len(names) > 20
    missing = sorted(name for name in names if f"`{name}`" not in documented)
    assert missing == [], "document these in docs/configuration.md"
