"""Numbered SQL migrations against a real PostgreSQL: once per file, under a lock, checksummed."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path

import psycopg
import pytest
from psycopg import AsyncConnection, sql

from perdure.common.migrate import (
    NO_TRANSACTION,
    MigrationError,
    _run_statements,
    apply_migrations,
)

HISTORY_TABLES = {
    "schema_migrations",
    "workflows",
    "events",
    "outbox",
    "step_progress",
    "step_tasks",
    "api_keys",
    "audit_log",
    "signal_consumptions",
    "payloads",
    "stream_heads",
    "frames",
    "schedules",
    "schedule_actions",
    "child_notices",
    "approvals",
    "journal_partitions",
    "namespace_retention",
    "events_0",
    "frames_0",
    "storage_samples",
}
FILES = {
    "perdure.history": [
        "0001_init.sql",
        "0002_waiting.sql",
        "0003_tracing.sql",
        "0004_attempts.sql",
        "0005_remote_steps.sql",
        "0006_security.sql",
        "0007_lease_keys.sql",
        "0008_signal_consumptions.sql",
        "0009_payloads.sql",
        "0010_attempts_and_timeouts.sql",
        "0011_stranded_runs.sql",
        "0012_journal_pages.sql",
        "0013_run_chains.sql",
        "0014_build_ids.sql",
        "0015_recovery.sql",
        "0016_patches.sql",
        "0017_streams.sql",
        "0018_step_attempt_indexes.sql",
        "0019_status_notifications.sql",
        "0020_emit_in_one_statement.sql",
        "0021_schedules.sql",
        "0022_start_keys.sql",
        "0023_flow_control.sql",
        "0024_children.sql",
        "0025_approvals.sql",
        "0026_step_usage.sql",
        "0027_partitioned_journal.sql",
        "0028_storage_samples.sql",
    ],
    "perdure.scheduler": [
        "0001_init.sql",
        "0002_tracing.sql",
        "0003_step_tasks.sql",
        "0004_lease_keys.sql",
        "0005_closed_tasks.sql",
        "0006_sticky.sql",
        "0007_run_numbers.sql",
        "0008_builds.sql",
        "0009_flow_control.sql",
        "0010_pauses.sql",
    ],
    "perdure.gateway": ["0001_directory.sql"],  # the directory of cells' placements
}
DIRECTORY_TABLES = {"schema_migrations", "placements"}
SCHEDULER_TABLES = {
    "schema_migrations",
    "tasks",
    "workflow_types",
    "builds",
    "workflow_policies",
    "fairness",
    "flow_limits",
    "budgets",
    "reservations",
    "pauses",
}


@pytest.fixture
async def conn(empty_database_dsn: str) -> AsyncIterator[AsyncConnection]:
    async with await psycopg.AsyncConnection.connect(
        empty_database_dsn, autocommit=True
    ) as connection:
        yield connection


async def tables(conn: AsyncConnection, schema: str) -> set[str]:
    cursor = await conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [schema]
    )
    return {str(row[0]) for row in await cursor.fetchall()}


async def recorded(conn: AsyncConnection, schema: str) -> list[tuple[int, str, str]]:
    cursor = await conn.execute(
        f"SELECT version, name, checksum FROM {schema}.schema_migrations ORDER BY version"
    )
    return [(int(v), str(n), str(c)) for v, n, c in await cursor.fetchall()]


def number_of(name: str) -> int:
    """A migration's version: the number its file name starts with."""
    return int(name.partition("_")[0])


def checksum_of(package: str, name: str) -> str:
    text = resources.files(package).joinpath("migrations", name).read_text(encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


async def lock_is_free(dsn: str, schema: str) -> bool:
    """Whether another session can take the schema's migration lock right now."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as other:
        cursor = await other.execute(
            "SELECT pg_try_advisory_lock(hashtext(%s))", [f"perdure.migrate.{schema}"]
        )
        row = await cursor.fetchone()
        assert row is not None
        return bool(row[0])


# --- the services' own migrations ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "package", "expected"),
    [
        ("history", "perdure.history", HISTORY_TABLES),
        ("scheduler", "perdure.scheduler", SCHEDULER_TABLES),
        ("directory", "perdure.gateway", DIRECTORY_TABLES),
    ],
)
async def test_apply_creates_the_tables_and_records_the_files(
    conn: AsyncConnection, schema: str, package: str, expected: set[str]
) -> None:
    assert await tables(conn, schema) == set()

    applied = await apply_migrations(conn, schema, package)

    assert applied == FILES[package]
    assert await tables(conn, schema) == expected
    assert await tables(conn, "public") == set()  # nothing leaked outside the schema
    assert await recorded(conn, schema) == [
        (number_of(name), name, checksum_of(package, name)) for name in FILES[package]
    ]


async def test_payloads_written_before_0009_read_back_as_their_json(conn: AsyncConnection) -> None:
    folder = resources.files("perdure.history").joinpath("migrations")
    await conn.execute("CREATE SCHEMA history")
    await conn.execute("SET search_path TO history")
    names = FILES["perdure.history"]
    before, payloads = names[: names.index("0009_payloads.sql")], "0009_payloads.sql"
    for name in before:
        await conn.execute(folder.joinpath(name).read_text().encode())
    await conn.execute(
        "INSERT INTO workflows (workflow_id, workflow_type, task_queue, status, input, result)"
        """ VALUES ('w', 't', 'q', 'COMPLETED', '{"n": 1.5}', 'null')"""
    )
    await conn.execute(
        "INSERT INTO events (workflow_id, event_id, event_type, fence, payload) VALUES"
        """ ('w', 1, 'WORKFLOW_STARTED', 0, '{"n": 1.5}'), ('w', 2, 'TIMER_STARTED', 1, NULL)"""
    )
    await conn.execute(folder.joinpath(payloads).read_text().encode())

    run = await conn.execute("SELECT input, input_encoding, result, result_encoding FROM workflows")
    assert await run.fetchall() == [(b'{"n": 1.5}', "json/plain", b"null", "json/plain")]
    events = await conn.execute("SELECT payload, payload_encoding FROM events ORDER BY event_id")
    assert await events.fetchall() == [(b'{"n": 1.5}', "json/plain"), (None, None)]


async def test_a_journal_written_before_0027_is_partitioned_whole(conn: AsyncConnection) -> None:
    folder = resources.files("perdure.history").joinpath("migrations")
    await conn.execute("CREATE SCHEMA history")
    await conn.execute("SET search_path TO history")
    names = FILES["perdure.history"]
    partitioned = "0027_partitioned_journal.sql"
    for name in names[: names.index(partitioned)]:
        text = folder.joinpath(name).read_text()
        if text.startswith(NO_TRANSACTION):  # one statement at a time
            await _run_statements(conn, sql.Identifier("history"), text)
            await conn.execute("SET search_path TO history")
        else:
            await conn.execute(text.encode())
    await conn.execute(
        "INSERT INTO workflows (workflow_id, chain_id, workflow_type, task_queue, status, input,"
        " closed_at) VALUES ('w', 'w', 't', 'q', 'COMPLETED', 'null', now())"
    )
    await conn.execute(
        "INSERT INTO events (workflow_id, event_id, event_type, fence, name, payload_sha256)"
        " VALUES ('w', 1, 'WORKFLOW_STARTED', 0, NULL, NULL),"
        " ('w', 2, 'SIGNAL_RECEIVED', 0, 'go', '\\x01'), ('w', 3, 'SIGNAL_CONSUMED', 1, NULL, NULL)"
    )
    await conn.execute("INSERT INTO payloads (sha256, data) VALUES ('\\x01', 'x')")
    await conn.execute(
        "INSERT INTO signal_consumptions (workflow_id, event_id, consumed_by) VALUES ('w', 2, 3)"
    )
    await conn.execute(
        "INSERT INTO frames (run_id, stream, seq, step_id, attempt, kind)"
        " SELECT run_id, 's', 1, 'a', 1, 'RESET' FROM workflows"
    )
    await conn.execute(folder.joinpath(partitioned).read_text().encode())

    async def one(query: str) -> tuple[object, ...]:
        row = await (await conn.execute(query)).fetchone()
        assert row is not None
        return tuple(row)

    assert await one("SELECT part, current_part() FROM workflows") == (0, 0)
    assert await one("SELECT count(*), min(tableoid::regclass::text), max(part) FROM events") == (
        3,
        "events_0",
        0,
    )
    assert await one("SELECT count(*), min(tableoid::regclass::text) FROM frames") == (
        1,
        "frames_0",
    )
    assert await one("SELECT part FROM signal_consumptions") == (0,)
    assert await one("SELECT first_part, last_part FROM payloads") == (0, 0)
    # The keys still hold: a signal is consumed once, and only an event of the run.
    with pytest.raises(psycopg.errors.UniqueViolation):
        await conn.execute(
            "INSERT INTO signal_consumptions (workflow_id, event_id, consumed_by, part)"
            " VALUES ('w', 2, 4, 0)"
        )
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        await conn.execute(
            "INSERT INTO signal_consumptions (workflow_id, event_id, consumed_by, part)"
            " VALUES ('w', 9, 4, 0)"
        )
    # A run moved to its archive key takes its journal along (ON UPDATE CASCADE).
    await conn.execute("UPDATE workflows SET workflow_id = '@~w' WHERE workflow_id = 'w'")
    assert await one("SELECT count(*) FROM events WHERE workflow_id = '@~w'") == (3,)
    assert await one("SELECT workflow_id FROM signal_consumptions") == ("@~w",)


async def test_both_schemas_live_side_by_side(conn: AsyncConnection) -> None:
    assert await apply_migrations(conn, "history", "perdure.history") == FILES["perdure.history"]
    scheduler = await apply_migrations(conn, "scheduler", "perdure.scheduler")
    assert scheduler == FILES["perdure.scheduler"]
    assert await tables(conn, "history") == HISTORY_TABLES
    assert await tables(conn, "scheduler") == SCHEDULER_TABLES


async def test_applying_twice_is_a_no_op(conn: AsyncConnection, empty_database_dsn: str) -> None:
    await apply_migrations(conn, "scheduler", "perdure.scheduler")
    await conn.execute(
        "INSERT INTO scheduler.tasks (workflow_id, workflow_type, task_queue)"
        " VALUES ('w', 't', 'q')"
    )
    before = await recorded(conn, "scheduler")

    assert await apply_migrations(conn, "scheduler", "perdure.scheduler") == []

    assert await recorded(conn, "scheduler") == before
    cursor = await conn.execute("SELECT count(*) FROM scheduler.tasks")
    assert await cursor.fetchone() == (1,)  # the data survived: nothing was re-run
    assert await lock_is_free(empty_database_dsn, "scheduler")


async def test_concurrent_runs_apply_each_file_exactly_once(empty_database_dsn: str) -> None:
    # Three replicas of each service start at once, each on its own connection.
    connections = [
        await psycopg.AsyncConnection.connect(empty_database_dsn, autocommit=True) for _ in range(6)
    ]
    try:
        results = await asyncio.gather(
            *(apply_migrations(c, "history", "perdure.history") for c in connections[:3]),
            *(apply_migrations(c, "scheduler", "perdure.scheduler") for c in connections[3:]),
        )
        assert sorted(results[:3]) == [[], [], FILES["perdure.history"]]
        assert sorted(results[3:]) == [[], [], FILES["perdure.scheduler"]]
        for schema, expected in (("history", HISTORY_TABLES), ("scheduler", SCHEDULER_TABLES)):
            files = FILES[f"perdure.{schema}"]
            assert [r[:2] for r in await recorded(connections[0], schema)] == [
                (number_of(name), name) for name in files
            ]
            assert await tables(connections[0], schema) == expected
    finally:
        for c in connections:
            await c.close()


async def test_an_edited_migration_is_refused(
    conn: AsyncConnection, empty_database_dsn: str
) -> None:
    await apply_migrations(conn, "history", "perdure.history")
    await conn.execute("UPDATE history.schema_migrations SET checksum = 'edited' WHERE version = 1")

    with pytest.raises(MigrationError, match=r"history migration 0001_init\.sql changed"):
        await apply_migrations(conn, "history", "perdure.history")

    assert await lock_is_free(empty_database_dsn, "history")  # the error released the lock
    # The other schema is checked on its own.
    applied = await apply_migrations(conn, "scheduler", "perdure.scheduler")
    assert applied == FILES["perdure.scheduler"]


# --- migration files of a package made up for the test -------------------------------------------


@pytest.fixture
def make_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[dict[str, str]], str]:
    """Create an importable package whose migrations/ folder holds the given files."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(files: dict[str, str]) -> str:
        name = f"migpkg_{uuid.uuid4().hex[:8]}"
        folder = tmp_path / name / "migrations"
        folder.mkdir(parents=True)
        (tmp_path / name / "__init__.py").write_text("")
        for file_name, text in files.items():
            (folder / file_name).write_text(text, encoding="utf-8")
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    return make


def add_file(package: str, name: str, text: str) -> None:
    """Add a migration file to a package made by `make_package`."""
    folder = resources.files(package).joinpath("migrations")
    Path(str(folder), name).write_text(text, encoding="utf-8")


async def test_files_apply_in_numeric_order_and_later_files_on_a_later_run(
    conn: AsyncConnection, make_package: Callable[[dict[str, str]], str]
) -> None:
    first = {
        "0010_add_column.sql": "ALTER TABLE things ADD COLUMN size int;",
        "0002_create.sql": "CREATE TABLE things (id int PRIMARY KEY);",
        "README.md": "not a migration",
    }
    package = make_package(first)
    assert await apply_migrations(conn, "app", package) == [
        "0002_create.sql",
        "0010_add_column.sql",
    ]
    # Unqualified names were created in the schema, not in public.
    assert await tables(conn, "app") == {"schema_migrations", "things"}

    add_file(package, "0011_index.sql", "CREATE INDEX things_size ON things (size);")
    assert await apply_migrations(conn, "app", package) == ["0011_index.sql"]
    assert [v for v, _, _ in await recorded(conn, "app")] == [2, 10, 11]


async def test_a_failing_migration_rolls_back_and_stops(
    conn: AsyncConnection, empty_database_dsn: str, make_package: Callable[[dict[str, str]], str]
) -> None:
    package = make_package(
        {
            "0001_ok.sql": "CREATE TABLE good (id int);",
            "0002_broken.sql": "CREATE TABLE half (id int); SELECT * FROM missing_table;",
            "0003_never.sql": "CREATE TABLE never (id int);",
        }
    )
    with pytest.raises(psycopg.errors.UndefinedTable):
        await apply_migrations(conn, "app", package)

    assert await tables(conn, "app") == {"schema_migrations", "good"}
    assert [name for _, name, _ in await recorded(conn, "app")] == ["0001_ok.sql"]
    assert await lock_is_free(empty_database_dsn, "app")


async def waiting_on_a_lock(conn: AsyncConnection, backend_pid: int) -> None:
    """Return once the session `backend_pid` waits for a lock (generous: a few seconds)."""
    for _ in range(600):
        cursor = await conn.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [backend_pid]
        )
        row = await cursor.fetchone()
        if row is not None and row[0] == "Lock":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {backend_pid} never waited for a lock")


@contextlib.asynccontextmanager
async def migrating_behind_a_write(
    dsn: str, package: str
) -> AsyncIterator[tuple[int, asyncio.Task[list[str]]]]:
    """`package`'s migrations applied on a connection of their own (its backend pid, and the
    task applying them) while another session holds a write to app.things under way. At the
    end the write commits, whatever happened, and the task is let finish."""
    connect = psycopg.AsyncConnection.connect
    async with (
        await connect(dsn) as writer,
        await connect(dsn, autocommit=True) as migrator,
    ):
        await writer.execute("INSERT INTO app.things VALUES (1)")  # a write under way
        building = asyncio.create_task(apply_migrations(migrator, "app", package))
        try:
            yield migrator.info.backend_pid, building
        finally:
            await writer.commit()
            await asyncio.wait([building], timeout=60)


async def test_an_index_built_outside_a_transaction_lets_writes_go_on(
    conn: AsyncConnection, empty_database_dsn: str, make_package: Callable[[dict[str, str]], str]
) -> None:
    package = make_package({"0001_table.sql": "CREATE TABLE things (id int);"})
    await apply_migrations(conn, "app", package)
    index = "CREATE INDEX CONCURRENTLY things_id ON things (id);\n"
    add_file(package, "0002_index.sql", f"{NO_TRANSACTION}\n{index}")
    async with migrating_behind_a_write(empty_database_dsn, package) as (migrator, building):
        await waiting_on_a_lock(conn, migrator)  # the build waits for the write
        # Another write meanwhile is not held back (a plain CREATE INDEX, queued for its share
        # lock behind the open write, would hold it back: lock_timeout).
        await conn.execute("SET lock_timeout = '5s'")
        await conn.execute("INSERT INTO app.things VALUES (2)")
        await conn.execute("RESET lock_timeout")
        assert not building.done()
    assert building.result() == ["0002_index.sql"]
    cursor = await conn.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = 'app.things_id'::regclass"
    )
    assert await cursor.fetchone() == (True,)


async def test_an_index_build_cut_short_is_dropped_and_built_again(
    conn: AsyncConnection, empty_database_dsn: str, make_package: Callable[[dict[str, str]], str]
) -> None:
    package = make_package({"0001_table.sql": "CREATE TABLE things (id int);"})
    await apply_migrations(conn, "app", package)
    statements = [
        "DROP INDEX CONCURRENTLY IF EXISTS things_id;",
        "CREATE INDEX CONCURRENTLY things_id ON things (id);",
    ]
    add_file(package, "0002_index.sql", "\n".join([NO_TRANSACTION, *statements]))
    async with migrating_behind_a_write(empty_database_dsn, package) as (migrator, building):
        await waiting_on_a_lock(conn, migrator)  # mid-build
        await conn.execute("SELECT pg_cancel_backend(%s)", [migrator])
        with pytest.raises(psycopg.errors.QueryCanceled):
            await asyncio.wait_for(building, 60)
    valid = "SELECT indisvalid FROM pg_index WHERE indexrelid = 'app.things_id'::regclass"
    assert await (await conn.execute(valid)).fetchone() == (False,)  # left behind, invalid
    assert [name for _, name, _ in await recorded(conn, "app")] == ["0001_table.sql"]
    assert await lock_is_free(empty_database_dsn, "app")

    assert await apply_migrations(conn, "app", package) == ["0002_index.sql"]
    assert await (await conn.execute(valid)).fetchone() == (True,)


async def test_a_migration_outside_a_transaction_stopped_part_way_runs_again_whole(
    conn: AsyncConnection, empty_database_dsn: str, make_package: Callable[[dict[str, str]], str]
) -> None:
    statements = [
        "CREATE TABLE IF NOT EXISTS first (id int);",
        "DROP INDEX CONCURRENTLY IF EXISTS later_id;",
        "CREATE INDEX CONCURRENTLY later_id ON later (id);",
    ]
    package = make_package({"0001_part_way.sql": "\n".join([NO_TRANSACTION, *statements])})
    with pytest.raises(psycopg.errors.UndefinedTable):
        await apply_migrations(conn, "app", package)
    assert await tables(conn, "app") == {"schema_migrations", "first"}  # done up to there
    assert await recorded(conn, "app") == []
    assert await lock_is_free(empty_database_dsn, "app")

    await conn.execute("CREATE TABLE app.later (id int)")  # what it needed is there now
    assert await apply_migrations(conn, "app", package) == ["0001_part_way.sql"]
    assert [name for _, name, _ in await recorded(conn, "app")] == ["0001_part_way.sql"]


async def test_migrations_refuse_a_connection_in_a_transaction(empty_database_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(empty_database_dsn) as manual:
        with pytest.raises(MigrationError, match="autocommit"):
            await apply_migrations(manual, "history", "perdure.history")


async def test_a_misnamed_file_is_refused(
    conn: AsyncConnection, make_package: Callable[[dict[str, str]], str]
) -> None:
    package = make_package({"init.sql": "CREATE TABLE t (id int);"})
    with pytest.raises(MigrationError, match="must start with a number"):
        await apply_migrations(conn, "app", package)
    assert "t" not in await tables(conn, "app")


def test_perdure_migrate_applies_both_schemas_once(empty_database_dsn: str) -> None:
    """`perdure migrate` (a deployment's migration Job): everything pending, then nothing."""
    command = [sys.executable, "-m", "perdure.cli", "migrate", "--database-url", empty_database_dsn]
    first = subprocess.run(command, capture_output=True, text=True, timeout=120)
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    for schema in ("history", "scheduler"):
        assert f"{schema}: {', '.join(FILES[f'perdure.{schema}'])}" in first.stdout
        assert f"{schema}: up to date" in again.stdout
