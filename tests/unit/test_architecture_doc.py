"""ARCHITECTURE.md maps concepts to `file:name`: every file and every name it gives must exist,
so the map breaks loudly when code moves instead of sending the next reader nowhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE_HEADING = "## Where each concept lives"
# `perdure/history/store.py:ADVANCE_FENCE`, `sdk/node/src/leases.js:renew`, or a file alone.
REFERENCE = re.compile(r"`([\w./-]+\.(?:py|js))(?::([\w.]+))?`")


def concept_rows() -> list[str]:
    """The table's rows (after its heading, up to the next heading), header lines left out."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return rows[1:]  # the header; the separator starts with "| ---" and names nothing


def resolve(path: str) -> Path | None:
    """A Python path is relative to a distribution's src/; anything else to the repository."""
    if path.startswith("perdure/"):
        found = sorted(REPO.glob(f"services/*/src/{path}"))
        return found[0] if len(found) == 1 else None
    candidate = REPO / path
    return candidate if candidate.is_file() else None


def python_names(source: str) -> set[str]:
    """Module-level functions, classes and assignments, and `Class.method` for methods."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            names.update(
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def defines_js(source: str, name: str) -> bool:
    """A function, class, method or top-level binding named `name` (JavaScript)."""
    pattern = (
        rf"^\s*(?:export\s+)?(?:async\s+)?(?:function\s+{name}\b|class\s+{name}\b"
        rf"|(?:const|let)\s+{name}\b|{name}\s*\([^)]*\)\s*\{{)"
    )
    return re.search(pattern, source, re.M) is not None


def test_the_concept_table_names_only_what_exists() -> None:
    rows = concept_rows()
    references = [ref for row in rows for ref in REFERENCE.findall(row.split("|")[2])]
    assert len(rows) >= 20 and len(references) >= len(rows)  # every concept says where
    missing = []
    for path, name in references:
        file = resolve(path)
        if file is None:
            missing.append(f"{path} (no such file)")
            continue
        if not name:
            continue
        source = file.read_text()
        found = name in python_names(source) if file.suffix == ".py" else defines_js(source, name)
        if not found:
            missing.append(f"{path}:{name}")
    assert missing == [], "ARCHITECTURE.md names code that does not exist: update the table"
