"""The commands that open the database take a multi-host URL, in both of libpq's forms, and
find the primary whichever host is named first."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.fixtures.cluster import REPO_ROOT
from tests.fixtures.replicated_postgres import ReplicatedPostgres, replicated_pair

PERDURE = str(REPO_ROOT / ".venv" / "bin" / "perdure")


@pytest.fixture
def pair() -> Iterator[ReplicatedPostgres]:
    """A primary and a synchronous standby of this test's own."""
    with replicated_pair() as servers:
        yield servers


def _perdure(*args: str) -> str:
    done = subprocess.run([PERDURE, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_migrate_and_keys_find_the_primary(pair: ReplicatedPostgres) -> None:
    standby_first = (
        f"host=127.0.0.1,127.0.0.1 port={pair.standby.port},{pair.primary.port} user=postgres"
        " dbname=postgres target_session_attrs=read-write connect_timeout=5"
    )
    assert "0001_init.sql" in _perdure("migrate", "--database-url", pair.url())
    assert "up to date" in _perdure("migrate", "--database-url", standby_first)
    token = _perdure(
        "keys", "create", "--role", "admin", "--name", "ops", "--database-url", standby_first
    )
    assert token.startswith("prd_")
