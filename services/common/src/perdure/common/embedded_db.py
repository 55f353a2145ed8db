"""The embedded PostgreSQL used when no database URL is configured."""

from __future__ import annotations

import logging
import pathlib

import pgserver

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = ".perdure"


def start_embedded_postgres(data_dir: str | pathlib.Path, *, keep_running: bool) -> str:
    """Start (or join) the embedded server whose data lives in `data_dir`; return its DSN.

    With keep_running, the server outlives this process (a service joining a shared server);
    otherwise it stops when the last process using it exits.
    """
    root = pathlib.Path(data_dir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(root / "pgdata", cleanup_mode=None if keep_running else "stop")
    dsn = str(server.get_uri())
    log.info("embedded PostgreSQL running with data in %s", root / "pgdata")
    return dsn
