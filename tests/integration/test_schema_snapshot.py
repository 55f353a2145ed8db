"""docs/schema/ is each service's schema as its migrations leave it today."""

from __future__ import annotations

from tools.schema_snapshot import REGENERATE, SNAPSHOT_DIR, snapshots_of


def test_the_committed_schema_snapshots_match_the_migrations(server_dsn: str) -> None:
    for service, migrated in snapshots_of(server_dsn).items():
        path = SNAPSHOT_DIR / f"{service}.txt"
        committed = path.read_text() if path.exists() else ""
        assert migrated == committed, (
            f"{path.name} is not what the {service} migrations give: run `{REGENERATE}` "
            "and commit the result"
        )
