"""Command-line flags every service shares; each defaults to its PERDURE_* variable."""

from __future__ import annotations

import argparse
import os

DEFAULT_PORTS = {"gateway": 7400, "history": 7401, "scheduler": 7402}
GATEWAY_HTTP_PORT = 7480  # the HTTP/JSON API and the web UI


def add_listen_flag(parser: argparse.ArgumentParser, service: str) -> None:
    """--listen host:port (PERDURE_<SERVICE>_LISTEN)."""
    variable = f"PERDURE_{service.upper()}_LISTEN"
    default = f"0.0.0.0:{DEFAULT_PORTS[service]}"
    parser.add_argument(
        "--listen",
        default=os.environ.get(variable, default),
        help=f"host:port to serve on ({variable}, default {default})",
    )


def add_health_listen_flag(parser: argparse.ArgumentParser, service: str) -> None:
    """--health-listen host:port (PERDURE_<SERVICE>_HEALTH_LISTEN): a plaintext port serving
    only grpc.health.v1, for probes that hold no certificate; none by default."""
    variable = f"PERDURE_{service.upper()}_HEALTH_LISTEN"
    parser.add_argument(
        "--health-listen",
        default=os.environ.get(variable) or None,
        help=f"host:port of a plaintext health-only port ({variable}, default none)",
    )


def add_database_flag(parser: argparse.ArgumentParser, service: str) -> None:
    """--database-url (PERDURE_<SERVICE>_DATABASE_URL, PERDURE_DATABASE_URL, or embedded)."""
    parser.add_argument(
        "--database-url",
        default=None,
        help=f"PostgreSQL URL (PERDURE_{service.upper()}_DATABASE_URL or PERDURE_DATABASE_URL; "
        "an embedded PostgreSQL in PERDURE_DATA_DIR when unset)",
    )


def add_address_flag(parser: argparse.ArgumentParser, service: str) -> None:
    """--<service> host:port of another service (PERDURE_<SERVICE>_ADDRESS)."""
    variable = f"PERDURE_{service.upper()}_ADDRESS"
    default = f"localhost:{DEFAULT_PORTS[service]}"
    parser.add_argument(
        f"--{service}",
        default=os.environ.get(variable, default),
        help=f"{service} address ({variable}, default {default})",
    )
