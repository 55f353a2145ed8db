"""Error reasons have one home (perdure.common.reasons): the services spell none but through
its enum, and every reason a user's call may get is documented for callers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from perdure.common.reasons import INTERNAL_REASONS, Reason

ROOT = Path(__file__).resolve().parents[3]
# The calls that make an error from a reason (ApiError and its helpers).
ERROR_CALLS = {
    "ApiError",
    "HttpError",
    "OpenCap",
    "already_exists",
    "error_body",
    "exhausted",
    "failed_precondition",
    "invalid_argument",
    "not_found",
    "permission_denied",
    "unauthenticated",
}
_CODE = re.compile(r"[A-Z][A-Z0-9_]+")


def reason_literals(service: str) -> list[tuple[str, int, str]]:
    """The reasons a service's error calls spell as string literals: (file, line, reason)."""
    found = []
    for path in sorted((ROOT / "services" / service / "src").rglob("*.py")):
        found += literal_reasons(path.read_text(encoding="utf-8"), path.name)
    return found


def literal_reasons(source: str, name: str) -> list[tuple[str, int, str]]:
    """The reasons the error calls in `source` spell as string literals."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called not in ERROR_CALLS:
            continue
        for arg in [*node.args, *(keyword.value for keyword in node.keywords)]:
            value = arg.value if isinstance(arg, ast.Constant) else None
            # (A limit's setting, PERDURE_..., is named beside its reason.)
            if isinstance(value, str) and _CODE.fullmatch(value) and "PERDURE_" not in value:
                found.append((name, node.lineno, value))
    return found


@pytest.mark.parametrize("service", ["common", "history", "scheduler", "gateway"])
def test_services_spell_reasons_only_through_the_enum(service: str) -> None:
    assert reason_literals(service) == []


def test_the_scan_finds_a_reason_spelled_as_a_string() -> None:
    """The scan itself can fail: a literal reason in an error call is found."""
    source = 'raise ApiError(grpc.StatusCode.INTERNAL, "INTERNAL", "boom")\n'
    assert literal_reasons(source, "example.py") == [("example.py", 1, "INTERNAL")]


def test_every_reason_a_call_may_get_is_documented_for_callers() -> None:
    documents = [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("proto/**/*.proto")]
    text = "\n".join(path.read_text(encoding="utf-8") for path in documents)
    undocumented = [
        r for r in Reason if r not in INTERNAL_REASONS and not re.search(rf"\b{r}\b", text)
    ]
    assert undocumented == []
