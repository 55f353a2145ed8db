"""What every `perdure` command that calls the gateway takes alike: --address and
--namespace (before or after the subcommand's name), the API key from the environment or
`perdure dev`'s data directory, and JSON values given inline, as @file or - (stdin)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common.embedded_db import DEFAULT_DATA_DIR
from perdure.common.payload import json_payload

DEV_KEY_FILE = "admin.key"  # where `perdure dev` leaves its admin key, in its data directory


class UsageError(Exception):
    """A command-line value that cannot be used (exit code 2)."""


def add_gateway_flags(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """--address and --namespace; the API key comes from the environment (see api_key).

    On a `subcommand` they default to nothing, so that the value given before the
    subcommand's name (on its group's parser) stands unless given again after it."""
    parser.add_argument(
        "--address",
        default=argparse.SUPPRESS
        if subcommand
        else os.environ.get("PERDURE_GATEWAY_ADDRESS", "localhost:7400"),
        help="gateway address (PERDURE_GATEWAY_ADDRESS, default localhost:7400)",
    )
    parser.add_argument(
        "--namespace",
        default=argparse.SUPPRESS if subcommand else os.environ.get("PERDURE_NAMESPACE", ""),
        help="namespace (PERDURE_NAMESPACE; default: the API key's, or 'default')",
    )


def add_gateway_flags_to_subcommands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """--address and --namespace after each subcommand's name too."""
    for parser in set(commands.choices.values()):
        add_gateway_flags(parser, subcommand=True)


def api_key() -> str | None:
    """PERDURE_API_KEY, else the key `perdure dev` made in PERDURE_DATA_DIR (./.perdure/).
    Never a flag: `ps` would show it to everyone on the machine."""
    if key := os.environ.get("PERDURE_API_KEY"):
        return key
    dev_key = Path(os.environ.get("PERDURE_DATA_DIR", DEFAULT_DATA_DIR)) / DEV_KEY_FILE
    return dev_key.read_text().strip() if dev_key.is_file() else None


def json_text(flag: str, given: str) -> str:
    """The JSON text of a flag: as written, from a file (@path), or from stdin (-)."""
    if given == "-":
        return sys.stdin.read()
    if given.startswith("@"):
        try:
            return Path(given[1:]).read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"{flag}: cannot read {given[1:]}: {error.strerror}") from None
    return given


def json_argument(flag: str, given: str) -> Payload:
    """A flag's JSON value (json_text), sent exactly as written (numbers are never read as
    floats); a UsageError when it is not JSON."""
    text = json_text(flag, given).strip()
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise UsageError(f"{flag} is not valid JSON: {error}") from None
    return json_payload(text)
