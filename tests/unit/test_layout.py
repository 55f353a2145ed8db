"""The package layout's rules: one namespace shared by several distributions, services that
never import each other, and an SDK with no server code in it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = [ROOT / "proto", *sorted((ROOT / "services").glob("*/src"))]
SERVICES = ("gateway", "history", "scheduler")
SERVER_PACKAGES = ("perdure.common", "perdure.internal", *(f"perdure.{s}" for s in SERVICES))


def imports_of(package_dir: Path) -> dict[Path, set[str]]:
    """Every module a package's files import, absolute names only."""
    found: dict[Path, set[str]] = {}
    for path in package_dir.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[path] = names
    return found


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_perdure_is_a_namespace_in_every_distribution() -> None:
    for root in SOURCE_ROOTS:
        assert (root / "perdure").is_dir(), root
        assert not (root / "perdure" / "__init__.py").exists(), root


def test_each_perdure_package_belongs_to_one_distribution() -> None:
    owners: dict[str, Path] = {}
    for root in SOURCE_ROOTS:
        for package in (root / "perdure").iterdir():
            if package.is_dir() and package.name != "__pycache__":
                assert package.name not in owners, (package.name, owners.get(package.name), root)
                owners[package.name] = root


@pytest.mark.parametrize("sdk_package", ["worker", "client"])
def test_the_sdk_imports_no_server_code(sdk_package: str) -> None:
    package_dir = ROOT / "services" / "worker" / "src" / "perdure" / sdk_package
    for path, names in imports_of(package_dir).items():
        bad = {n for n in names if any(under(n, server) for server in SERVER_PACKAGES)}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("service", SERVICES)
def test_services_never_import_each_other(service: str) -> None:
    package_dir = ROOT / "services" / service / "src" / "perdure" / service
    others = [f"perdure.{s}" for s in SERVICES if s != service] + ["perdure.worker", "perdure.cli"]
    for path, names in imports_of(package_dir).items():
        bad = {n for n in names if any(under(n, other) for other in others)}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
