"""A service's connections carry its name for pg_stat_activity, unless the operator's
database URL names them already (never overridden)."""

from __future__ import annotations

from perdure.common.db import named


def test_a_connection_is_named_after_its_service() -> None:
    dsn = "postgresql://perdure@db.internal:5432/perdure"
    assert named(dsn, "perdure-history") == {"application_name": "perdure-history"}
    assert named("host=db dbname=perdure", "perdure-scheduler") == {
        "application_name": "perdure-scheduler"
    }


def test_a_name_the_database_url_gives_is_kept() -> None:
    assert named("postgresql://db/perdure?application_name=ours", "perdure-history") == {}
    assert named("host=db application_name=ours", "perdure-history") == {}
    assert named("postgresql://db/perdure", "") == {}
