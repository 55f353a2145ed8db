"""The embedded PostgreSQL used when no database URL is configured."""

from __future__ import annotations

import logging
import os
import pathlib
import warnings
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = ".perdure"


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # pgserver warns at import when XDG_RUNTIME_DIR is unset; its fallback is fine.
        warnings.simplefilter("ignore")
        import pgserver  # imported here: services given a database URL never need it
    return pgserver


def start_embedded_postgres(data_dir: str | pathlib.Path, *, keep_running: bool) -> str:
    """Start (or join) the embedded server whose data lives in `data_dir`; return its DSN.

    With keep_running, the server outlives this process (a service joining a shared server);
    otherwise it stops when the last process using it exits.
    """
    root = pathlib.Path(data_dir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    server = _pgserver().get_server(root / "pgdata", cleanup_mode=None if keep_running else "stop")
    dsn = str(server.get_uri())
    log.info("embedded PostgreSQL running with data in %s", root / "pgdata")
    return dsn


def stop_embedded_postgres(data_dir: str | pathlib.Path, mode: str = "fast") -> None:
    """Stop the embedded server of `data_dir`: "fast" cuts connections and checkpoints,
    "immediate" quits at once, as a crash would (recovery replays the WAL at the next start)."""
    pgdata = pathlib.Path(data_dir).expanduser().resolve() / "pgdata"
    # As root, pgserver runs PostgreSQL as its own "pgserver" user.
    user = "pgserver" if os.geteuid() == 0 else None
    _pgserver().pg_ctl(["-m", mode, "-w", "stop"], pgdata=pgdata, user=user)
